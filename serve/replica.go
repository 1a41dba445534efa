package serve

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/escurel/escurel/index"
)

// replicaCollector reports, for a read replica (escurel serve
// --replica-of), the published generation it serves and how old it is;
// nothing for a writer's index.
type replicaCollector struct{ ix *index.Index }

var (
	replicaInfoDesc = prometheus.NewDesc("escurel_replica_info", "1, labelled with the published generation a read replica serves (the writer's name) and its digest.", []string{"generation", "digest"}, nil)
	replicaSeqDesc  = prometheus.NewDesc("escurel_replica_publish_seq", "The publish number (the published CURRENT's sequence) a read replica serves.", nil, nil)
	replicaAgeDesc  = prometheus.NewDesc("escurel_replica_age_seconds", "Seconds since the generation a read replica serves was published (the writer's clock).", nil, nil)
	replicaPubDesc  = prometheus.NewDesc("escurel_replica_published_timestamp_seconds", "When the generation a read replica serves was published, Unix seconds.", nil, nil)
	replicaChkDesc  = prometheus.NewDesc("escurel_replica_checked_timestamp_seconds", "When a read replica last read the published CURRENT, Unix seconds.", nil, nil)
	replicaErrDesc  = prometheus.NewDesc("escurel_replica_check_failing", "1 while a read replica's last look at the published CURRENT failed (it serves what it has), else 0.", nil, nil)
)

func (c *replicaCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{replicaInfoDesc, replicaSeqDesc, replicaAgeDesc, replicaPubDesc, replicaChkDesc, replicaErrDesc} {
		ch <- d
	}
}

func (c *replicaCollector) Collect(ch chan<- prometheus.Metric) {
	info, ok := c.ix.Replica()
	if !ok {
		return
	}
	failing := 0.0
	if info.CheckError != "" {
		failing = 1
	}
	ch <- prometheus.MustNewConstMetric(replicaInfoDesc, prometheus.GaugeValue, 1, info.Generation, info.Digest)
	ch <- prometheus.MustNewConstMetric(replicaSeqDesc, prometheus.GaugeValue, float64(info.Seq))
	ch <- prometheus.MustNewConstMetric(replicaAgeDesc, prometheus.GaugeValue, info.Age(time.Now()).Seconds())
	ch <- prometheus.MustNewConstMetric(replicaPubDesc, prometheus.GaugeValue, float64(info.PublishedAt.UnixNano())/1e9)
	ch <- prometheus.MustNewConstMetric(replicaChkDesc, prometheus.GaugeValue, float64(info.CheckedAt.UnixNano())/1e9)
	ch <- prometheus.MustNewConstMetric(replicaErrDesc, prometheus.GaugeValue, failing)
}
