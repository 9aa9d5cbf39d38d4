package billing

import (
	"fmt"
	"time"
)

// Alert is what a holder is told about an idle streak, in English and Chinese.
type Alert struct {
	Kind    AlertKind // AlertIdleWarning or AlertIdleRelease (due)
	At      int64     // ms: when it is due (warn_after or release_after into the streak)
	Streak  IdleStreak
	English string
	Chinese string
}

// Alerts turns streaks into the warnings and releases their policies call for:
// at most one warning per streak, and one release where the policy enables it.
func Alerts(streaks []IdleStreak, loc *time.Location) []Alert {
	var out []Alert
	for _, s := range streaks {
		if s.Warn() {
			out = append(out, newAlert(AlertIdleWarning, s.WarnAt(), s, loc))
		}
		if s.Release() {
			out = append(out, newAlert(AlertIdleRelease, s.ReleaseAt(), s, loc))
		}
	}
	return out
}

func newAlert(kind AlertKind, at int64, s IdleStreak, loc *time.Location) Alert {
	since := time.UnixMilli(s.Start).In(loc).Format("2006-01-02 15:04")
	mins := func(d time.Duration) int64 { return int64(d / time.Minute) }
	holder := s.Key.Project
	if s.Key.User != "" {
		holder += "/" + s.Key.User
	}
	a := Alert{Kind: kind, At: at, Streak: s}
	what := fmt.Sprintf("%s (%s %s)", s.Key.InstanceID, s.Key.GPUModel, s.Key.Profile)
	whatZH := fmt.Sprintf("%s（%s %s）", s.Key.InstanceID, s.Key.GPUModel, s.Key.Profile)
	idleFor := mins(s.Policy.WarnAfter)
	switch kind {
	case AlertIdleWarning:
		a.English = fmt.Sprintf("GPU instance %s held by %s has been idle for more than %d min since %s (%s).",
			what, holder, idleFor, since, loc)
		a.Chinese = fmt.Sprintf("%s 占用的 GPU 实例 %s自 %s（%s）起已空闲超过 %d 分钟。",
			holder, whatZH, since, loc, idleFor)
		if s.Policy.AutoRelease && s.Policy.ReleaseAfter > 0 {
			a.English += fmt.Sprintf(" It will be released after %d min idle; start using it or release it yourself.", mins(s.Policy.ReleaseAfter))
			a.Chinese += fmt.Sprintf("空闲满 %d 分钟将被自动释放，请尽快使用或主动释放。", mins(s.Policy.ReleaseAfter))
		} else {
			a.English += " Idle time is billed like any held time; release the instance if you no longer need it."
			a.Chinese += "空闲时间同样计费，如不再使用请及时释放。"
		}
	default:
		a.English = fmt.Sprintf("GPU instance %s held by %s was idle for more than %d min since %s (%s) and is due for release under its project's policy.",
			what, holder, mins(s.Policy.ReleaseAfter), since, loc)
		a.Chinese = fmt.Sprintf("%s 占用的 GPU 实例 %s自 %s（%s）起空闲超过 %d 分钟，已达到自动释放条件。",
			holder, whatZH, since, loc, mins(s.Policy.ReleaseAfter))
	}
	return a
}
