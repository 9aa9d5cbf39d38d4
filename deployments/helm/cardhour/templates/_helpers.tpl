{{- define "cardhour.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "cardhour.labels" -}}
app.kubernetes.io/part-of: cardhour
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* selector labels of one component: (dict "ctx" $ "component" "serve") */}}
{{- define "cardhour.selector" -}}
app.kubernetes.io/name: cardhour
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "cardhour.secretName" -}}
{{- if .Values.secrets.existingSecret -}}
{{- .Values.secrets.existingSecret -}}
{{- else -}}
{{- include "cardhour.fullname" . -}}
{{- end -}}
{{- end -}}

{{- define "cardhour.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{- define "cardhour.collectorImage" -}}
{{- printf "%s:%s" .Values.image.collectorRepository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
