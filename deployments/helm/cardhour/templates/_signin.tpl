{{/* Sign-in (docs/auth.md): which providers signin.config names, where the
secret files come from, and the checks of the values. */}}

{{- define "cardhour.signinConfig" -}}
{{- .Values.signin.config | default dict | toYaml -}}
{{- end -}}

{{/* "true" when signin.config names an OpenID provider */}}
{{- define "cardhour.signinOIDC" -}}
{{- if index (.Values.signin.config | default dict) "oidc-issuer" }}true{{ end -}}
{{- end -}}

{{/* "true" when signin.config names an LDAP directory */}}
{{- define "cardhour.signinLDAP" -}}
{{- if index (.Values.signin.config | default dict) "ldap-url" }}true{{ end -}}
{{- end -}}

{{/* the Secret holding oidc-client-secret and ldap-bind-password */}}
{{- define "cardhour.signinSecretName" -}}
{{- .Values.signin.existingSecret | default (include "cardhour.secretName" .) -}}
{{- end -}}

{{/* the checksum that rolls serve's pods when the files change (serve reads
them at start only) */}}
{{- define "cardhour.signinChecksum" -}}
{{- printf "%s\n---\n%s\n---\n%s" (include "cardhour.signinConfig" .) .Values.signin.mapping .Values.signin.ldapCACert | sha256sum -}}
{{- end -}}

{{- define "cardhour.signinCheck" -}}
{{- $s := .Values.signin -}}
{{- $cfg := $s.config | default dict -}}
{{- if not $s.mapping -}}
{{- fail "signin.enabled needs signin.mapping: the role mapping file (--set-file signin.mapping=mapping.yaml; docs/auth.md)" -}}
{{- end -}}
{{- if not (or (index $cfg "oidc-issuer") (index $cfg "ldap-url") (index $cfg "cas-url")) -}}
{{- fail "signin.config needs a provider: oidc-issuer, ldap-url or cas-url (docs/auth.md)" -}}
{{- end -}}
{{- range $k, $v := $cfg -}}
{{- if has $k (list "signin-config" "role-mapping" "oidc-client-secret-file" "ldap-bind-password-file") -}}
{{- fail (printf "signin.config.%s: the chart sets it (from signin.mapping, signin.oidcClientSecret, signin.ldapBindPassword)" $k) -}}
{{- end -}}
{{- if and (eq $k "ldap-ca-file") $s.ldapCACert -}}
{{- fail "signin.config.ldap-ca-file and signin.ldapCACert: give one of them" -}}
{{- end -}}
{{- if or (kindIs "map" $v) (kindIs "slice" $v) -}}
{{- fail (printf "signin.config.%s: want a single value, as on serve's command line" $k) -}}
{{- end -}}
{{- end -}}
{{- $own := or $s.existingSecret $.Values.secrets.existingSecret -}}
{{- if and $own (or $s.oidcClientSecret $s.ldapBindPassword) -}}
{{- fail "signin.oidcClientSecret and signin.ldapBindPassword are written to the chart's Secret, which signin.existingSecret or secrets.existingSecret replaces: put the keys oidc-client-secret and ldap-bind-password in that Secret instead" -}}
{{- end -}}
{{- if and (not $own) (index $cfg "oidc-issuer") (not $s.oidcClientSecret) -}}
{{- fail "signin.config.oidc-issuer needs signin.oidcClientSecret (or signin.existingSecret with the key oidc-client-secret)" -}}
{{- end -}}
{{- if and (not $own) (index $cfg "ldap-url") (not $s.ldapBindPassword) -}}
{{- fail "signin.config.ldap-url needs signin.ldapBindPassword (or signin.existingSecret with the key ldap-bind-password)" -}}
{{- end -}}
{{- end -}}
