package signin

import (
	"strings"
	"testing"

	"github.com/go-ldap/ldap/v3"
	"github.com/stretchr/testify/require"
)

func TestCheckUserName(t *testing.T) {
	for _, ok := range []string{"2022110315", "t0042", "zhang.san", "li_si-2@example.edu.cn", strings.Repeat("a", maxUserName)} {
		require.NoError(t, checkUserName(ok), ok)
	}
	for _, bad := range []string{"", strings.Repeat("a", maxUserName+1), "*)(uid=*", "*", "a b", "a,ou=x", `a\2a`, "(uid=x)", "张三", "a\x00", "a;b", "a\n"} {
		err := checkUserName(bad)
		r := AsRefusal(err)
		require.NotNil(t, r, "%q accepted", bad)
		require.Equal(t, "bad_user_name", r.Code, bad)
	}
}

func TestFillFilterEscapes(t *testing.T) {
	require.Equal(t, "(uid=t0042)", fillFilter("(uid=%s)", "t0042"))
	// Were a name with filter characters to get past checkUserName, it
	// would still be one value.
	require.Equal(t, `(uid=\2a\29\28uid=\2a)`, fillFilter("(uid=%s)", "*)(uid=*"))
	require.Equal(t, `(&(objectClass=person)(uid=a\5c\00))`, fillFilter("(&(objectClass=person)(uid=%s))", "a\\\x00"))
	dn := "cn=Zhang\\, San,ou=people,dc=example,dc=edu"
	require.Equal(t, "(member=cn=Zhang\\5c, San,ou=people,dc=example,dc=edu)", fillFilter("(member=%s)", dn))
	_, err := ldap.CompileFilter(fillFilter("(member=%s)", "cn=a(b)*,dc=x"))
	require.NoError(t, err, "a DN with filter characters is one escaped value")
}

func TestCheckFilter(t *testing.T) {
	require.NoError(t, checkFilter("user filter", "(uid=%s)"))
	require.NoError(t, checkFilter("user filter", "(&(objectClass=inetOrgPerson)(uid=%s))"))
	require.ErrorContains(t, checkFilter("user filter", "(uid=x)"), "needs %s exactly once")
	require.ErrorContains(t, checkFilter("user filter", "(|(uid=%s)(mail=%s))"), "needs %s exactly once")
	require.ErrorContains(t, checkFilter("user filter", "(uid=%s"), `user filter "(uid=%s"`)
}
