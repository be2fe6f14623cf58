// Package promconnaudit exports a connaudit pool's statistics to
// Prometheus: a [prometheus.Collector] in the shape of client_golang's
// collector for database/sql's DBStats (collectors.NewDBStatsCollector),
// registered once per pool, each with its name in the "pool" label.
//
//	p, err := pool.New()
//	c, err := promconnaudit.NewCollector(p, "payments")
//	prometheus.MustRegister(c)
//
// It reads [pool.Pool.HostStats] at each scrape, nothing on the request's
// path, and needs no OpenTelemetry. Every series is a host's, labelled
// pool, server_address and server_port (the host:port dialed, named as the
// OpenTelemetry conventions name its parts); sum by (pool) for a pool's
// totals. A host's series stay, at 0 when it has nothing open, for the
// collector's life. The first [DefaultMaxHosts] hosts get series of their
// own ([MaxHosts] sets how many); the numbers of the hosts after them add
// up under server_address="_OTHER" ([OtherHost]), peaks by the largest.
// The metrics:
//
//	connaudit_pool_max_open_connections        gauge      the cap on connections per host (MaxConnsPerHost; 0: none), as DBStats' MaxOpenConnections is the cap
//	connaudit_pool_peak_open_connections       gauge      the largest number of connections open to the host at once (its Stats.MaxOpen), to set against the cap
//	connaudit_pool_open_connections            gauge      connections established, in use or idle
//	connaudit_pool_in_use_connections          gauge      connections serving a request
//	connaudit_pool_idle_connections            gauge      connections serving none
//	connaudit_pool_dialing_connections         gauge      dials (connect and TLS handshake) in progress
//	connaudit_pool_dials_total                 counter    dials started
//	connaudit_pool_dial_errors_total           counter    dials that failed
//	connaudit_pool_closed_total                counter    connections closed, by side (client, server) and reason (pool.CloseReason)
//	connaudit_pool_wait_count_total            counter    requests not served at once by an idle connection (a dial, or a connection in use)
//	connaudit_pool_wait_duration_seconds       histogram  each wait, dials included (Stats.Waits): its _sum is Stats.WaitDuration; its _count counts a retried request's waits once per attempt
//	connaudit_pool_waiting_requests            gauge      requests waiting for a connection now
//	connaudit_pool_connection_setup_duration_seconds histogram  each connection established, from its dial's start to its TLS handshake done (Stats.Setups)
//	connaudit_pool_requests_total              counter    requests
//	connaudit_pool_reused_requests_total       counter    requests served by a connection that had served one before
//	connaudit_pool_in_flight_requests          gauge      requests not finished (body not closed)
//	connaudit_pool_open_bodies                 gauge      response bodies handed out and not closed
//	connaudit_pool_hidden_retries_total        counter    requests the Transport sent again by itself (Stats.HiddenRetries)
//	connaudit_pool_hidden_retries_possibly_processed_total counter  those the server may have processed twice (Stats.HiddenRetriesPossiblyProcessed)
//
// The histograms' buckets are [pool.DurationBuckets], 25µs to 10s, the
// same as otelconnaudit's for the wait and the setup.
package promconnaudit
