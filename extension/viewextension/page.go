package viewextension

import (
	"html/template"
	"net/http"

	"github.com/windowaggregator/windowaggregator/internal/view"
)

// The page for a person (GET /): as served it holds the figures in tables, so that it reads without
// scripting; its script then polls the JSON every second and draws, as inline SVG, W's lag behind the
// wall clock and each aggregation's records per second by outcome over the extension's history (the
// last historyLength readings) and what it has polled since. No external
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
		Components []view.ComponentView
		Top        int
	}{view.Views(defaultTop), defaultTop})
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
<svg class="wchart" width="720" height="130" role="img" aria-label="W lag behind the wall clock"></svg>
{{if .Sources}}<h3>Sources ({{.SourcesTotal}})</h3><table class="sources"><tr><th>source</th><th>W</th><th>last seen</th><th></th></tr>
{{range .Sources}}<tr class="{{if .HoldsBack}}holds{{end}}{{if .Idle}} idle{{end}}"><td>{{if .Shared}}(shared){{else}}{{range $k, $v := .Source}}{{$k}}={{$v}} {{end}}{{end}}</td>
<td>{{if .Watermark}}{{ts .Watermark}}{{end}}</td><td>{{ts .LastSeen}}</td><td>{{if .HoldsBack}}holds W back{{else if .Idle}}idle{{end}}</td></tr>
{{end}}</table>{{end}}
{{range .Aggregations}}<h3 class="aggregation" data-name="{{.Name}}">{{.Name}} ({{.Signal}})</h3>
<p class="summary">series {{.Series}} of max_series {{.MaxSeries}}; records on time {{.Records.OnTime}}, late accepted {{.Records.LateAccepted}}, late routed {{.Records.LateRouted}}, dropped {{.Records.LateDropped}}, passed {{.Records.LatePassed}}, duplicates {{.Records.Duplicate}}, unmatched {{.Records.Unmatched}}</p>
<svg class="outcomes" width="720" height="110" role="img" aria-label="records per second by outcome"></svg>
<table class="top"><tr><th>series with the most records in {{if .LastWindowFired}}the last closed window{{else}}the next window to fire{{end}}{{if .LastWindowEnd}} (ending {{ts .LastWindowEnd}}){{end}}</th><th>records</th></tr>
{{range .TopSeries}}<tr><td>{{if .Overflow}}(overflow series){{else}}{{range $k, $v := .Series}}{{$k}}={{$v}} {{end}}{{end}}</td><td>{{.Records}}</td></tr>
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
// By component id, readings [{t, lag, recs}] earliest first: the extension's history at load, then
// each poll. The charts draw the last 300.
const hist = {};
const NS="http://www.w3.org/2000/svg";
function fmt(s){return s?new Date(s).toISOString().substring(11,23):""}
function hms(ms){return new Date(ms).toISOString().substring(11,19)}
function row(tag,cells){const tr=document.createElement("tr");cells.forEach(v=>{const c=document.createElement(tag);c.textContent=v;tr.appendChild(c)});return tr}
function svgEl(tag,attrs,text){const el=document.createElementNS(NS,tag);for(const k in attrs){el.setAttribute(k,attrs[k])}if(text!=null){el.textContent=text}return el}
// chart draws lines [{name, color, pts:[[t,y]]}] on one scale: the greatest y at the top left,
// the first and last times under the axis, and a legend on the right.
function chart(svg, lines, unit){
  svg.replaceChildren();
  const w=+svg.getAttribute("width"), h=+svg.getAttribute("height"), left=48, right=w-130, top=8, bottom=h-18;
  const all=lines.flatMap(l=>l.pts);
  svg.appendChild(svgEl("line",{x1:left,y1:bottom,x2:right,y2:bottom,stroke:"#999"}));
  svg.appendChild(svgEl("line",{x1:left,y1:top,x2:left,y2:bottom,stroke:"#999"}));
  if(all.length<2){svg.appendChild(svgEl("text",{x:left+6,y:top+14,"font-size":11,fill:"#666"},"waiting for readings"));return}
  const x0=Math.min(...all.map(p=>p[0])), x1=Math.max(...all.map(p=>p[0])), y1=Math.max(1e-9,...all.map(p=>p[1]));
  const X=t=>left+(t-x0)/(x1-x0||1)*(right-left), Y=v=>bottom-(v/y1)*(bottom-top);
  svg.appendChild(svgEl("text",{x:left-4,y:top+9,"font-size":10,"text-anchor":"end",class:"ymax"},(+y1.toPrecision(3))+unit));
  svg.appendChild(svgEl("text",{x:left-4,y:bottom,"font-size":10,"text-anchor":"end"},"0"));
  svg.appendChild(svgEl("text",{x:left,y:h-4,"font-size":10},hms(x0)));
  svg.appendChild(svgEl("text",{x:right,y:h-4,"font-size":10,"text-anchor":"end"},hms(x1)));
  lines.forEach((l,i)=>{
    if(l.pts.length>1){svg.appendChild(svgEl("path",{d:l.pts.map((p,j)=>(j?"L":"M")+X(p[0]).toFixed(1)+","+Y(p[1]).toFixed(1)).join(""),fill:"none",stroke:l.color,class:"series"}))}
    svg.appendChild(svgEl("rect",{x:right+10,y:top+i*15,width:10,height:10,fill:l.color}));
    svg.appendChild(svgEl("text",{x:right+24,y:top+i*15+9,"font-size":11},l.name));
  });
}
function remember(id,t,lag,recs){
  const h=hist[id]=hist[id]||[];
  if(h.length&&h[h.length-1].recs.length!==recs.length){h.length=0}
  if(h.length&&h[h.length-1].t>=t){return}
  h.push({t,lag,recs});if(h.length>300){h.splice(0,h.length-300)}
}
const late=r=>r.late_routed+r.late_dropped+r.late_passed;
const outcomes=[["on time",r=>r.on_time,"#2da44e"],["late accepted",r=>r.late_accepted,"#bf8700"],["late",late,"#cf222e"],["duplicate",r=>r.duplicate,"#8250df"],["unmatched",r=>r.unmatched,"#57606a"]];
function draw(c){
  const sec=document.querySelector('section.component[data-id="'+CSS.escape(c.id)+'"]');
  // a component restarted with other aggregations: the page's sections are not its own
  const names=[...sec?sec.querySelectorAll("h3.aggregation"):[]].map(h=>h.dataset.name);
  if(!sec||names.join("\n")!==c.aggregations.map(a=>a.name).join("\n")){location.reload();return}
  remember(c.id,Date.parse(c.wall_clock),c.watermark_lag_seconds,c.aggregations.map(a=>a.records));
  const h=hist[c.id];
  sec.querySelector(".w").textContent=c.watermark?fmt(c.watermark):"none yet";
  sec.querySelector(".lag").textContent=c.watermark_lag_seconds==null?"-":c.watermark_lag_seconds.toFixed(1)+" s";
  chart(sec.querySelector(".wchart"),[{name:"W lag, s",color:"#1f6feb",pts:h.filter(p=>p.lag!=null).map(p=>[p.t,p.lag])}]," s");
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
    t.replaceChildren(row("th",["series with the most records in "+(a.last_window_fired?"the last closed window":"the next window to fire")+(a.last_window_end?" (ending "+fmt(a.last_window_end)+")":""),"records"]));
    (a.top_series||[]).forEach(x=>t.appendChild(row("td",[x.overflow?"(overflow series)":Object.entries(x.series).map(e=>e.join("=")).join(" "),String(x.records)])));
  });
  const charts=sec.querySelectorAll(".outcomes");
  c.aggregations.forEach((a,i)=>{if(!charts[i]){return}
    // records per second by outcome: the difference of two readings over the seconds between them
    chart(charts[i],outcomes.map(([name,f,color])=>({name,color,pts:h.slice(1).map((p,j)=>[p.t,Math.max(0,f(p.recs[i])-f(h[j].recs[i]))/Math.max(.001,(p.t-h[j].t)/1000)])})),"/s");
  });
}
function bars(svg, vals){
  const w=+svg.getAttribute("width"), h=+svg.getAttribute("height"), m=Math.max(1,...vals), bw=(w-50)/Math.max(1,vals.length);
  svg.appendChild(svgEl("text",{x:40,y:12,"font-size":10,"text-anchor":"end"},String(m)));
  vals.forEach((v,i)=>svg.appendChild(svgEl("rect",{x:45+i*bw,width:Math.max(1,bw-3),y:h-5-(v/m)*(h-15),height:(v/m)*(h-15),fill:"#1f6feb",class:"bar"})));
}
function table(head,rows){const t=document.createElement("table");t.appendChild(row("th",head));rows.forEach(r=>t.appendChild(row("td",r)));return t}
const num=v=>v==null?"":String(+v.toPrecision(6));
document.addEventListener("submit",async ev=>{
  const f=ev.target;if(!f.classList.contains("explain")){return}
  ev.preventDefault();
  const q=new URLSearchParams({component:f.dataset.component,aggregation:f.dataset.aggregation});
  new FormData(f).forEach((v,k)=>{if(v!==""){q.append(k,v)}});
  const out=f.nextElementSibling;out.replaceChildren();
  const r=await fetch("/api/v1/series?"+q);
  if(!r.ok){const p=document.createElement("p");p.className="err";p.textContent=await r.text();out.appendChild(p);return}
  const x=await r.json();
  const p=document.createElement("p");p.className="answer";out.appendChild(p);
  const ws=x.windows||[];
  p.textContent=x.found?ws.length+" window(s) hold its records now.":"It holds no window now. "+x.why;
  if(ws.length){out.appendChild(table(["window","records","sum","fires at W","late records until W",""],
    ws.map(w=>[fmt(w.start)+" - "+fmt(w.end),String(w.records),num(w.sum),fmt(w.fires_at_watermark),fmt(w.expires_at_watermark),w.fired?"fired":"open"])))}
  const lv=x.last_values||[];
  const s=document.createElement("p");s.className="last";out.appendChild(s);
  s.textContent=lv.length?"Its last emitted windows (kept since "+fmt(x.last_values_since)+"):":x.last_values_since?"No emitted window yet: they are kept from the first question ("+fmt(x.last_values_since)+") on.":"No emitted window kept: they are kept once it is asked about while it has records.";
  if(lv.length){
    const svg=svgEl("svg",{width:360,height:70,class:"series-chart",role:"img","aria-label":"records of its last windows"});out.appendChild(svg);bars(svg,lv.map(w=>w.records));
    out.appendChild(table(["window","records","sum","avg","min","max","its outputs","late firings"],lv.map(w=>[fmt(w.start)+" - "+fmt(w.end),String(w.records),num(w.sum),num(w.avg),num(w.min),num(w.max),Object.entries(w.outputs||{}).map(([k,v])=>k+" "+num(v)).join(", "),String(w.late_firings)])));
  }
});
async function poll(){
  try{
    const r=await fetch("/api/v1/components?top={{.Top}}");
    const cs=await r.json();
    if(cs.length!==document.querySelectorAll("section.component").length){location.reload();return}
    cs.forEach(draw);
    document.getElementById("status").textContent="Refreshed "+new Date().toLocaleTimeString()+". Lists show at most {{.Top}} entries; charts the last 5 minutes.";
  }catch(e){document.getElementById("status").textContent="Cannot refresh: "+e}
}
async function start(){
  try{
    const r=await fetch("/api/v1/history");
    (await r.json()).forEach(c=>c.samples.forEach(s=>remember(c.id,Date.parse(s.wall_clock),s.watermark_lag_seconds,s.records)));
  }catch(e){}
  poll();setInterval(poll,1000);
}
start();
</script></body></html>`

// defaultTop and maxTop bound the lists of a response (sources, windows): the first defaultTop
// unless ?top=N asks for others, at most maxTop, whatever the number of series.
const defaultTop, maxTop = 20, 1000
