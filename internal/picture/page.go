package picture

// pageHTML is the page: inline style and SVG, no script, no link to
// anything outside it. Each lane is a <g class="lane" data-conn="ID">;
// its close reason is the text of its .reason; every bar and lane has a
// <title>, which a browser shows on hover.
const pageHTML = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width">
<title>{{.Title}}</title>
<style>
body{font:13px/1.4 system-ui,sans-serif;margin:16px;color:#222;background:#fff}
h1{font-size:18px}h2{font-size:15px;margin:20px 0 4px}
.verdict{padding:1px 6px;border-radius:3px;background:#dfd}.verdict.fail{background:#fdd}
.note{color:#555;margin:0}
svg{display:block;font:11px monospace}
.chunk{content-visibility:auto}
.ax line{stroke:#ddd}.ax text{fill:#666}
.life{stroke:#999;stroke-width:2}.dial{stroke:#bbb;stroke-width:2;stroke-dasharray:2 2}
.lane:hover .life{stroke:#333}
.s0{fill:#c9c9c9}.s1{fill:#8fb8de}.s2{fill:#f4b183}.s3{fill:#c5a3e0}.s4{fill:#a9d18e}.s5{fill:#ffd966}.s6{fill:#6fa8dc}.s7{fill:#888}
.k0{background:#c9c9c9}.k1{background:#8fb8de}.k2{background:#f4b183}.k3{background:#c5a3e0}.k4{background:#a9d18e}.k5{background:#ffd966}.k6{background:#6fa8dc}
.bar{fill:#eee;stroke:#999;stroke-width:.5}.failed .bar{stroke:#c00;stroke-width:1.5}
.x{stroke:#c00;stroke-width:1.5}
.cs{fill:#c00}.cc{fill:#06c}.co{fill:#999}
.why{fill:#333}.why.f{fill:#c00}
.link{stroke:#c60;stroke-width:1;fill:none;stroke-dasharray:3 2}
.legend span{display:inline-block;width:10px;height:10px;margin:0 3px 0 10px;vertical-align:middle}
pre{font:12px monospace;background:#f7f7f7;padding:8px}
</style></head><body>
<h1>{{.Title}}</h1>
<p class="legend">stages:{{range $i, $s := .Stages}}<span class="k{{$i}}"></span>{{$s}}{{end}}
· close: <b style="color:#c00">■</b> by the server <b style="color:#06c">■</b> by the client · <b style="color:#c60">- -</b> sent again</p>
{{range .Sets}}{{$set := .}}<section class="set" data-conns="{{.Conns}}" data-requests="{{.Reqs}}">
<h2>{{.Title}}{{if .Verdict}} <span class="verdict{{if .Failed}} fail{{end}}">{{.Verdict}}</span>{{end}}</h2>
{{range .Notes}}<p class="note">{{.}}</p>
{{end}}{{if .Omitted}}<p class="note">{{.Omitted}}</p>
{{end}}<svg xmlns="http://www.w3.org/2000/svg" width="{{.W}}" height="20" viewBox="0 0 {{.W}} 20">
<g class="ax">{{range .Axis}}<text x="{{.X}}" y="11">{{.Label}}</text>{{end}}</g></svg>
{{range .Chunks}}<div class="chunk" style="contain-intrinsic-size:auto {{.H}}px"><svg xmlns="http://www.w3.org/2000/svg" width="{{$set.W}}" height="{{.H}}" viewBox="0 {{.Y0}} {{$set.W}} {{.H}}">
<g class="ax">{{range $set.Axis}}<line x1="{{.X}}" x2="{{.X}}" y1="0" y2="{{$set.H}}"/>{{end}}</g>
{{range .Lanes}}{{template "lane" .}}{{end}}{{range .Links}}<path class="link" d="M{{.X1}} {{.Y1}}L{{.X2}} {{.Y2}}"><title>{{.Title}}</title></path>
{{end}}</svg></div>
{{end}}</section>
{{end}}{{with .Waterfall}}{{$w := .}}<section class="waterfall">
<h2>{{.Title}}</h2><p class="note">outcome: {{.Outcome}}</p>
<svg xmlns="http://www.w3.org/2000/svg" width="{{.W}}" height="{{.H}}" viewBox="0 0 {{.W}} {{.H}}">
<g class="ax">{{range .Axis}}<line x1="{{.X}}" x2="{{.X}}" y1="14" y2="{{$w.H}}"/><text x="{{.X}}" y="11">{{.Label}}</text>{{end}}</g>
{{range .Rows}}<g class="row"><title>{{.Name}} {{.Dur}}</title><text x="4" y="{{.TextY}}">{{.Name}}</text><rect class="s{{.Class}}" x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="12"/><text x="1054" y="{{.TextY}}">{{.Dur}}</text></g>
{{end}}</svg>{{if .Events}}<pre>{{range .Events}}{{.}}
{{end}}</pre>{{end}}</section>
{{end}}</body></html>
{{define "lane"}}<g class="lane{{if .Failed}} failed{{end}}" data-conn="{{.ID}}"><title>{{.Title}}</title><text x="4" y="{{.TextY}}">{{.Label}}</text>
{{if not .NoConn}}<line class="dial" x1="{{.X0}}" x2="{{.XUse}}" y1="{{.Y}}" y2="{{.Y}}" transform="translate(0 8)"/><line class="life" x1="{{.XUse}}" x2="{{.X1}}" y1="{{.Y}}" y2="{{.Y}}" transform="translate(0 8)"/>{{end}}
{{range .Bars}}<g class="req{{if .Failed}} failed{{end}}"><title>{{.Title}}</title><rect class="bar" x="{{.X}}" y="{{$.Y}}" width="{{.W}}" height="14" transform="translate(0 1)"/>{{range .Stages}}<rect class="s{{.Class}}" x="{{.X}}" y="{{$.Y}}" width="{{.W}}" height="10" transform="translate(0 3)"/>{{end}}</g>
{{end}}{{if not .NoConn}}{{if .Open}}{{else if .Failed}}{{else}}<rect class="{{if eq .ClosedBy "server"}}cs{{else}}cc{{end}}" x="{{.X1}}" y="{{.Y}}" width="3" height="16"/>{{end}}<text class="why{{if .Failed}} f{{end}}" x="1054" y="{{.TextY}}">{{if .Reason}}<tspan class="reason">{{.Reason}}</tspan>{{if .ClosedBy}}<tspan> by {{.ClosedBy}}</tspan>{{end}}{{end}}{{if .Why}}<tspan> {{.Why}}</tspan>{{end}}</text>{{end}}</g>
{{end}}`
