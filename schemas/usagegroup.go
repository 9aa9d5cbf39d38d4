package schemas

// GroupOf is the row of q that the usage of key k on node is summed into: its
// GPU model and profile, and its project, user, instance and node where q
// groups by them; BucketMS is left to the caller. The stores that group usage
// in Go (the in-memory store, the reads from runs) use it, so that they group
// as the databases' GROUP BY does.
func (q UsageRowQuery) GroupOf(k Key, node string) UsageRow {
	g := UsageRow{GPUModel: k.GPUModel, Profile: k.Profile}
	if q.ByProject {
		g.Project = k.Project
	}
	if q.ByUser {
		g.User = k.User
	}
	if q.ByInstance {
		g.InstanceID = k.InstanceID
	}
	if q.ByNode {
		g.Node = node
	}
	return g
}
