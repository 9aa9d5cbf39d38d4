package testenv

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

const (
	// EnvClickHouseCluster names the variable holding the native addresses
	// of every server of the test ClickHouse cluster (services.sh up chcluster).
	EnvClickHouseCluster = "CLICKHOUSE_CLUSTER_ADDRS"
	// EnvClickHouseClusterName names the variable holding its remote_servers name.
	EnvClickHouseClusterName = "CLICKHOUSE_CLUSTER"
)

// ClickHouseCluster returns the native addresses of every server of the
// test ClickHouse cluster and the cluster's name, or skips the test loudly
// when there is none. It skips under CI=true too: CI does not start the
// cluster profile yet (deployments/testenv/services.sh up chcluster).
func ClickHouseCluster(t testing.TB) ([]string, string) {
	t.Helper()
	value := os.Getenv(EnvClickHouseCluster)
	addrs, err := parseAddrs(value, defaultClickHousePort)
	var why string
	switch {
	case strings.TrimSpace(value) == "":
		why = EnvClickHouseCluster + " is not set"
	case err != nil:
		why = fmt.Sprintf("%s=%q is not a valid address list: %v", EnvClickHouseCluster, value, err)
	default:
		for _, a := range addrs {
			if err := dial(a, dialTimeout); err != nil {
				why = fmt.Sprintf("%s=%q: %s is not reachable: %v", EnvClickHouseCluster, value, a, err)
				break
			}
		}
	}
	if why != "" {
		t.Skip("SKIPPED cluster integration test: ClickHouse cluster not available (" + why + "); " +
			"run `eval \"$(bash deployments/testenv/services.sh up chcluster)\"` (ZooKeeper and three ClickHouse servers) first. " +
			"Not run by CI yet, so not a failure under CI=true.")
	}
	name := os.Getenv(EnvClickHouseClusterName)
	if name == "" {
		name = "cardhour"
	}
	return addrs, name
}

// EnvKafkaCluster names the variable holding the bootstrap addresses of
// every broker of the test Kafka cluster (services.sh up kcluster).
const EnvKafkaCluster = "KAFKA_CLUSTER_BROKERS"

// KafkaCluster returns the addresses of the three brokers of the test Kafka
// cluster, or skips the test loudly when they are not all reachable. It
// skips under CI=true too: CI does not start the profile (deployments/testenv/
// services.sh up kcluster; three JVMs do not fit its two cores beside the
// other services).
func KafkaCluster(t testing.TB) []string {
	t.Helper()
	value := os.Getenv(EnvKafkaCluster)
	addrs, err := parseAddrs(value, defaultKafkaPort)
	var why string
	switch {
	case strings.TrimSpace(value) == "":
		why = EnvKafkaCluster + " is not set"
	case err != nil:
		why = fmt.Sprintf("%s=%q is not a valid address list: %v", EnvKafkaCluster, value, err)
	case len(addrs) < 3:
		why = fmt.Sprintf("%s=%q names %d brokers, want 3", EnvKafkaCluster, value, len(addrs))
	default:
		for _, a := range addrs {
			if err := dial(a, dialTimeout); err != nil {
				why = fmt.Sprintf("%s=%q: %s is not reachable: %v", EnvKafkaCluster, value, a, err)
				break
			}
		}
	}
	if why != "" {
		t.Skip("SKIPPED Kafka cluster integration test: Kafka cluster not available (" + why + "); " +
			"run `eval \"$(bash deployments/testenv/services.sh up kcluster)\"` (three Kafka nodes) first, or `make test-kcluster`. " +
			"Not run by CI, so not a failure under CI=true.")
	}
	return addrs
}
