package main

// helpText is what a command's -h says besides its flags.
type helpText struct {
	about    string   // what the command does
	exits    string   // its exit status, code by code
	examples []string // three command lines
}

// helpFor returns the help of the command name.
func helpFor(name string) helpText {
	switch name {
	case "trace":
		return helpText{
			about: `Trace one request: the connection it got (new or reused), DNS, connect, TLS,
the request written, the server's wait and the transfer, every event, then
the response header (as httpstat shows it, each secret masked).
No redirect is followed. A URL without a scheme means http://; flags may come
before or after the URL. Secrets (the URL's user name, password and query
values, Authorization, Proxy-Authorization, Cookie, every -H value) are never
printed, as sent or as a server echoes them Go-quoted, JSON-escaped or
percent-encoded; one of 1 or 2 bytes only where it follows its name (pin=42).
Nor are the server's: a response header named for one (Set-Cookie,
X-Auth-Token, X-Api-Key) shows REDACTED, and so do a URL's user information
and query values, a Bearer token and a value after a secret's name.
"get conn" is the time the Transport took to hand the request a connection,
DNS, connect and TLS apart: its own bookkeeping when the request took an idle
connection or dialed its own; a wait only when another request held it.`,
			exits: `exit status:
  0  a response came (any status; with -fail, below 400)
  1  the request failed once its response began (reading the body), the body
     was cut by -max-body, -fail and a status of 400 or more, -http2 not met,
     or interrupted
  2  a usage error (a flag, the URL, a file named)
  3  the target did not answer: no response (refused, DNS, TLS, timeout, not HTTP)
`,
			examples: []string{
				"connaudit trace example.com",
				`connaudit trace -json -H "Authorization: Bearer $TOKEN" https://api.example.com/v1/items`,
				"connaudit trace https://example.com/health -fail -http2",
			},
		}
	case "probe":
		return helpText{
			about: `Audit a host's connection reuse: send -n requests through a tracked pool and
report the dials against the ideal, who closed each connection and why, the
stages by new and reused connection, the server's keep-alive limits and
findings. A URL without a scheme means http://; flags may come before or after
the URL. Secrets (the URL's user name, password and query values, every header
value) are never printed, as sent or as a server echoes them Go-quoted,
JSON-escaped or percent-encoded; one of 1 or 2 bytes only where it follows its
name (pin=42).`,
			exits: `exit status:
  0  no finding at or above -fail-on
  1  a finding at or above -fail-on, or the probe was cut by -deadline or
     interrupted (the report covers what was done)
  2  a usage error (a flag, the URL, a file named)
  3  the target did not answer: no request got a response (the report comes out)
`,
			examples: []string{
				"connaudit probe -n 100 -c 4 https://example.com/",
				"connaudit probe -find-max-requests -find-idle-timeout localhost:8080",
				"connaudit probe -json -o report.json -fail-on warn https://api.example.com/health",
			},
		}
	case "scenarios":
		return helpText{
			about: `Run the fault catalogue against an embedded loopback fault server: each
scenario drives a fault at a pool capped at one connection per host, checks
the outcome, then that the same pool serves /ok with nothing leaked.`,
			exits: `exit status:
  0  every scenario passed
  1  a scenario failed, or the run was cut by -deadline or interrupted (the
     scenarios not run are reported skipped)
  2  a usage error (a flag, the pattern, a file named)
`,
			examples: []string{
				"connaudit scenarios -list",
				"connaudit scenarios -run 'reset|timeout' -v",
				"connaudit scenarios -json -junit report.xml",
			},
		}
	case "serve":
		return helpText{
			about: `Serve the fault catalogue to clients of any language (docs/serve.md): a kit
opens a session at CONNAUDIT_URL, runs each scenario through the client under
test and reports what the caller got; the verdicts combine that with what the
server saw. With -- CMD ARGS…, run CMD with CONNAUDIT_URL and CONNAUDIT_CA (the
CA file of the HTTPS listeners) in its environment, wait for it and print
every session's verdicts; without, serve until interrupted and print each
session's verdicts as it ends. Every listener is on loopback unless -addr
names another address for the control API (a warning is printed then).`,
			exits: `exit status:
  0  every session passed, and CMD (if any) exited 0 having had a scenario
     judged; without CMD, an interrupt that cut no session short is how
     serve stops
  1  a session failed: a scenario failed or was not reported, none passed,
     or it ended before the kit said done (it gave up, an interrupt cut it
     short); or CMD exited non-zero, was stopped (-deadline, an interrupt),
     or had no scenario judged. A finding (hidden-retry, loss-to-caller,
     open-at-done) fails no session by itself
  2  a usage error (a flag, a file named, CMD not found)
`,
			examples: []string{
				"connaudit serve -- kits/curl/example.sh",
				"connaudit serve -run '^retry/' -- kits/python/.venv/bin/python kits/python/example_requests.py",
				"connaudit serve -ca /tmp/connaudit-ca.pem",
			},
		}
	case "proxy":
		return helpText{
			about: `A reverse proxy the client under test is pointed at (docs/proxy.md): it
accounts for each client's connections from accept to close (requests, idle
gaps, who closed each and why), the upstream pool's, the requests a client
sent again, and injects the faults its rules say, touching nothing else. At
an interrupt or -duration it writes the report and the verdicts
(write-committed-twice, hidden-retry, unbounded, server-idle-timeout).`,
			exits: `exit status:
  0  no verdict failed
  1  a verdict failed
  2  a usage error (a flag, a rule, the upstream's URL, a file named), or the listener
     could not start (-listen's address in use or not one)
`,
			examples: []string{
				"connaudit proxy -upstream http://127.0.0.1:8080 -listen 127.0.0.1:9090 -html p.html -debug :6060",
				"connaudit proxy -upstream https://api.internal -upstream-ca ca.pem -tls -fault 'reset nth=3'",
				"connaudit proxy -upstream http://127.0.0.1:8080 -faults rules.txt -seed 7 -duration 5m",
			},
		}
	case "version":
		return helpText{
			about: "Print connaudit's version.",
			exits: `exit status:
  0  the version was printed
  2  a usage error
`,
			examples: []string{"connaudit version"},
		}
	}
	return helpText{exits: exitHelp}
}
