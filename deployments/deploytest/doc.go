// Package deploytest checks the deployment files under deployments/: the Helm
// chart rendered with its default and example values (every object decoded
// strictly into the k8s.io/api types), the plain manifests in
// deployments/kubernetes against the chart, the single-host compose file and
// the Dockerfile, and the Grafana dashboards' SQL against a real ClickHouse.
package deploytest
