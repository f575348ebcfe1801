package viewextension

import (
	"html/template"
	"net/http"

	"github.com/windowaggregator/windowaggregator"
)

// The page for a person (GET /): as served it holds the figures in tables, so that it reads without
// scripting; its script then polls the JSON every second and draws, as inline SVG, W's lag behind the
// wall clock and each aggregation's records by outcome since the page was opened. No external
// script, style or font: it works without internet.

// page renders the components' view.
var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"ts":    func(t interface{ Format(string) string }) string { return t.Format("15:04:05.000") },
	"deref": func(f *float64) float64 { return *f },
}).Parse(pageHTML))

func servePage(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	if len(r.URL.Query()) > 0 {
		http.Error(w, "the page takes no query parameter", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'")
	_ = page.Execute(w, struct {
		Components []windowaggregator.ComponentView
		Top        int
	}{windowaggregator.Views(defaultTop), defaultTop})
}

const pageHTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>window_aggregator</title>
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.3em}h2{font-size:1.15em;margin-top:1.5em}h3{font-size:1em}
table{border-collapse:collapse;margin:.4em 0}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left}
th{background:#f3f3f3}.holds{background:#fff3c4;font-weight:bold}.idle{color:#888}
.err{color:#b00}svg{border:1px solid #ddd;background:#fafafa}
</style></head><body>
<h1>window_aggregator</h1>
<p id="status">Figures as served; they refresh every second. Lists show at most {{.Top}} entries.</p>
<div id="components">
{{range .Components}}{{$id := .ID}}<section class="component" data-id="{{.ID}}">
<h2>{{.ID}}</h2>
<p>W <b class="w">{{if .Watermark}}{{ts .Watermark}}{{else}}none yet{{end}}</b>, wall clock {{ts .WallClock}},
lag <b class="lag">{{if .WatermarkLagSeconds}}{{printf "%.1f" (deref .WatermarkLagSeconds)}} s{{else}}-{{end}}</b>, held by {{.HeldBy}}.</p>
<svg class="wchart" width="600" height="120" role="img" aria-label="W lag behind the wall clock"></svg>
{{if .Sources}}<h3>Sources ({{.SourcesTotal}})</h3><table class="sources"><tr><th>source</th><th>W</th><th>last seen</th><th></th></tr>
{{range .Sources}}<tr class="{{if .HoldsBack}}holds{{end}}{{if .Idle}} idle{{end}}"><td>{{if .Shared}}(shared){{else}}{{range $k, $v := .Source}}{{$k}}={{$v}} {{end}}{{end}}</td>
<td>{{if .Watermark}}{{ts .Watermark}}{{end}}</td><td>{{ts .LastSeen}}</td><td>{{if .HoldsBack}}holds W back{{else if .Idle}}idle{{end}}</td></tr>
{{end}}</table>{{end}}
{{range .Aggregations}}<h3 class="aggregation" data-name="{{.Name}}">{{.Name}} ({{.Signal}})</h3>
<p class="summary">series {{.Series}} of max_series {{.MaxSeries}}; records on time {{.Records.OnTime}}, late accepted {{.Records.LateAccepted}}, late routed {{.Records.LateRouted}}, dropped {{.Records.LateDropped}}, passed {{.Records.LatePassed}}, duplicates {{.Records.Duplicate}}, unmatched {{.Records.Unmatched}}</p>
<svg class="outcomes" width="600" height="100" role="img" aria-label="records by outcome"></svg>
<table class="top"><tr><th>series with the most records in the last closed window{{if .LastWindowEnd}} (ended {{ts .LastWindowEnd}}){{end}}</th><th>records</th></tr>
{{range .TopSeries}}<tr><td>{{range $k, $v := .Series}}{{$k}}={{$v}} {{end}}</td><td>{{.Records}}</td></tr>
{{end}}</table>
<form class="explain" data-component="{{$id}}" data-aggregation="{{.Name}}">Explain a series:
{{range .GroupBy}}<label>{{.}} <input name="key.{{.}}" size="12"></label> {{end}}<button type="submit">explain</button></form>
<div class="explanation"></div>
<table class="windows"><tr><th>window</th><th>fires at W</th><th>late records until W</th><th></th></tr>
{{range .Windows}}<tr><td>{{ts .Start}} - {{ts .End}}</td><td>{{ts .FiresAtW}}</td><td>{{ts .ExpiresAtW}}</td><td>{{if .Fired}}fired{{else}}open{{end}}</td></tr>
{{end}}</table>
{{end}}
{{with .Checkpoint}}<p class="checkpoint">Checkpoint: {{if .Last}}last {{ts .Last}}, {{.Bytes}} bytes{{else}}none yet{{end}}{{if .Error}} <span class="err">{{.Error}}</span>{{end}}</p>{{end}}
<p class="emission">Emission: {{.Emission.QueuedPoints}} points queued, {{.Emission.DroppedPoints}} dropped{{if .Emission.LastError}}; last error <span class="err">{{.Emission.LastError}}</span>{{end}}</p>
</section>
{{else}}<p id="none">No window_aggregator component is running in this collector.</p>
{{end}}</div>
<script>
"use strict";
const hist = {}; // by component id: the polls since the page opened, [{t, lag, aggs}]
function fmt(s){return s?new Date(s).toISOString().substring(11,23):""}
function row(tag,cells){const tr=document.createElement("tr");cells.forEach(v=>{const c=document.createElement(tag);c.textContent=v;tr.appendChild(c)});return tr}
function line(svg, pts, color){
  if(pts.length<2){return}
  const w=+svg.getAttribute("width"), h=+svg.getAttribute("height");
  const xs=pts.map(p=>p[0]), ys=pts.map(p=>p[1]);
  const x0=Math.min(...xs), x1=Math.max(...xs), y1=Math.max(1,...ys);
  const d=pts.map((p,i)=>(i?"L":"M")+((p[0]-x0)/(x1-x0||1)*(w-40)+35).toFixed(1)+","+(h-15-(p[1]/y1)*(h-25)).toFixed(1)).join("");
  const el=document.createElementNS("http://www.w3.org/2000/svg","path");
  el.setAttribute("d",d);el.setAttribute("fill","none");el.setAttribute("stroke",color);el.setAttribute("class","series");
  svg.appendChild(el);
  const t=document.createElementNS("http://www.w3.org/2000/svg","text");
  t.setAttribute("x",2);t.setAttribute("y",12);t.setAttribute("font-size",10);t.textContent=y1.toFixed(1);svg.appendChild(t);
}
function draw(c){
  const sec=document.querySelector('section.component[data-id="'+CSS.escape(c.id)+'"]');
  if(!sec){location.reload();return}
  const h=hist[c.id]=(hist[c.id]||[]).concat([{t:Date.parse(c.wall_clock),lag:c.watermark_lag_seconds,aggs:c.aggregations}]).slice(-300);
  sec.querySelector(".w").textContent=c.watermark?fmt(c.watermark):"none yet";
  sec.querySelector(".lag").textContent=c.watermark_lag_seconds==null?"-":c.watermark_lag_seconds.toFixed(1)+" s";
  const svg=sec.querySelector(".wchart");svg.replaceChildren();
  line(svg,h.filter(p=>p.lag!=null).map(p=>[p.t,p.lag]),"#1f6feb");
  const tbl=sec.querySelector("table.sources");
  if(tbl&&c.sources){
    tbl.replaceChildren(row("th",["source","W","last seen",""]));
    c.sources.forEach(x=>{const tr=row("td",[x.shared?"(shared)":Object.entries(x.source||{}).map(e=>e.join("=")).join(" "),fmt(x.watermark),fmt(x.last_seen),x.holds_back?"holds W back":(x.idle?"idle":"")]);
      if(x.holds_back){tr.className="holds"}else if(x.idle){tr.className="idle"}tbl.appendChild(tr)});
  }
  const wins=sec.querySelectorAll("table.windows");
  c.aggregations.forEach((a,i)=>{const t=wins[i];if(!t){return}
    t.replaceChildren(row("th",["window","fires at W","late records until W",""]));
    (a.windows||[]).forEach(x=>t.appendChild(row("td",[fmt(x.start)+" - "+fmt(x.end),fmt(x.fires_at_watermark),fmt(x.expires_at_watermark),x.fired?"fired":"open"])));
  });
  const sums=sec.querySelectorAll(".summary");
  c.aggregations.forEach((a,i)=>{if(sums[i]){sums[i].textContent="series "+a.series+" of max_series "+a.max_series+"; records on time "+a.records.on_time+", late accepted "+a.records.late_accepted+", late routed "+a.records.late_routed+", dropped "+a.records.late_dropped+", passed "+a.records.late_passed+", duplicates "+a.records.duplicate+", unmatched "+a.records.unmatched}});
  const em=sec.querySelector(".emission");
  em.textContent="Emission: "+c.emission.queued_points+" points queued, "+c.emission.dropped_points+" dropped"+(c.emission.last_error?"; last error "+c.emission.last_error:"");
  const ck=sec.querySelector(".checkpoint");
  if(ck&&c.checkpoint){ck.textContent="Checkpoint: "+(c.checkpoint.last?"last "+fmt(c.checkpoint.last)+", "+c.checkpoint.bytes+" bytes":"none yet")+(c.checkpoint.error?" "+c.checkpoint.error:"")}
  const tops=sec.querySelectorAll("table.top");
  c.aggregations.forEach((a,i)=>{const t=tops[i];if(!t){return}
    t.replaceChildren(row("th",["series with the most records in the last closed window"+(a.last_window_end?" (ended "+fmt(a.last_window_end)+")":""),"records"]));
    (a.top_series||[]).forEach(x=>t.appendChild(row("td",[Object.entries(x.series).map(e=>e.join("=")).join(" "),String(x.records)])));
  });
  const charts=sec.querySelectorAll(".outcomes");
  c.aggregations.forEach((a,i)=>{
    const s=charts[i];if(!s){return}s.replaceChildren();
    const per=k=>h.slice(1).map((p,j)=>[p.t,Math.max(0,p.aggs[i].records[k]-h[j].aggs[i].records[k])]);
    const late=r=>r.late_routed+r.late_dropped+r.late_passed;
    const lateSeries=h.slice(1).map((p,j)=>[p.t,Math.max(0,late(p.aggs[i].records)-late(h[j].aggs[i].records))]);
    line(s,per("on_time"),"#2da44e");line(s,per("late_accepted"),"#bf8700");line(s,lateSeries,"#cf222e");line(s,per("duplicate"),"#8250df");
  });
}
function bars(svg, vals){
  const w=+svg.getAttribute("width"), h=+svg.getAttribute("height"), m=Math.max(1,...vals), bw=(w-10)/Math.max(1,vals.length);
  vals.forEach((v,i)=>{const r=document.createElementNS("http://www.w3.org/2000/svg","rect");
    r.setAttribute("x",5+i*bw);r.setAttribute("width",Math.max(1,bw-3));r.setAttribute("y",h-5-(v/m)*(h-15));r.setAttribute("height",(v/m)*(h-15));
    r.setAttribute("fill","#1f6feb");r.setAttribute("class","bar");svg.appendChild(r)});
}
document.addEventListener("submit",async ev=>{
  const f=ev.target;if(!f.classList.contains("explain")){return}
  ev.preventDefault();
  const q=new URLSearchParams({component:f.dataset.component,aggregation:f.dataset.aggregation});
  new FormData(f).forEach((v,k)=>{if(v!==""){q.append(k,v)}});
  const out=f.nextElementSibling;out.replaceChildren();
  const r=await fetch("/api/v1/series?"+q);
  if(!r.ok){const p=document.createElement("p");p.className="err";p.textContent=await r.text();out.appendChild(p);return}
  const x=await r.json();
  const p=document.createElement("p");p.className="answer";
  if(!x.found){p.textContent="No such series now. "+x.why;out.appendChild(p);return}
  p.textContent=x.windows.length+" window(s) hold its records:";out.appendChild(p);
  const t=document.createElement("table");t.appendChild(row("th",["window","records","sum","fires at W","late records until W",""]));
  x.windows.forEach(w=>t.appendChild(row("td",[fmt(w.start)+" - "+fmt(w.end),String(w.records),String(w.sum),fmt(w.fires_at_watermark),fmt(w.expires_at_watermark),w.fired?"fired":"open"])));
  out.appendChild(t);
  const svg=document.createElementNS("http://www.w3.org/2000/svg","svg");svg.setAttribute("width",300);svg.setAttribute("height",60);svg.setAttribute("class","series-chart");
  out.appendChild(svg);bars(svg,x.windows.map(w=>w.records));
});
async function poll(){
  try{
    const r=await fetch("/api/v1/components?top={{.Top}}");
    const cs=await r.json();
    if(cs.length!==document.querySelectorAll("section.component").length){location.reload();return}
    cs.forEach(draw);
    document.getElementById("status").textContent="Refreshed "+new Date().toLocaleTimeString()+". Lists show at most {{.Top}} entries.";
  }catch(e){document.getElementById("status").textContent="Cannot refresh: "+e}
}
setInterval(poll,1000);poll();
</script></body></html>`
