package viewextension

import (
	"encoding/json"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/windowaggregator/windowaggregator/internal/view"
)

// The page for a person (GET /): the Go template below renders every figure, so that it reads
// without scripting. Its script refreshes it every second by fetching the page again and swapping
// the parts marked live (the explainer's forms and answers stay), and draws, as inline SVG, W's lag
// behind the wall clock and each aggregation's records per second by outcome from the extension's
// readings (the history at load, then the readings taken since, all a second apart). No external
// script, style or font: it works without internet. Times are UTC, and say so.

// page renders the components' view.
var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"ts":        func(t time.Time) string { return t.UTC().Format("15:04:05.000") },
	"secs":      func(f float64) string { return fmt.Sprintf("%.1f s", f) },
	"perSec":    func(f float64) string { return fmt.Sprintf("%.1f/s", f) },
	"json":      func(v any) (string, error) { b, err := json.Marshal(v); return string(b), err },
	"pairs":     pairs,
	"deref":     func(f *float64) float64 { return *f },
	"derefTime": func(t *time.Time) time.Time { return *t },
}).Parse(pageHTML))

// pairs is a source or series by its keys' values, "k=v k=v", in key order.
func pairs(m map[string]string) string {
	var b []byte
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if len(b) > 0 {
			b = append(b, ' ')
		}
		b = append(b, k...)
		b = append(b, '=')
		b = append(b, m[k]...)
	}
	return string(b)
}

func servePage(w http.ResponseWriter, r *http.Request, h *history) {
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
		Now        time.Time
		Tie        time.Duration
		RateSpan   int
	}{h.views(defaultTop), defaultTop, time.Now(), view.SourcesTie, rateSpan})
}

const pageHTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>window_aggregator</title>
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.3em}h2{font-size:1.15em;margin-top:1.5em}h3{font-size:1em}
table{border-collapse:collapse;margin:.4em 0}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left}
th{background:#f3f3f3}.holds{background:#fff3c4;font-weight:bold}.atw{background:#f6f0d8}.idle{color:#888}
.overdue{background:#ffe0e0;font-weight:bold}.err{color:#b00}svg{border:1px solid #ddd;background:#fafafa}
.health{padding:.4em .6em;background:#eef4fb;border-left:4px solid #1f6feb}.health .bad{color:#b00;font-weight:bold}
</style></head><body>
<h1>window_aggregator</h1>
<p id="status" class="live" data-part="status">Times are UTC. Figures of {{ts .Now}} UTC; they refresh every second. Lists show at most {{.Top}} entries; charts the last 5 minutes, rates over {{.RateSpan}} s.</p>
<div id="components">
{{range .Components}}{{$id := .ID}}{{$c := .}}<section class="component" data-id="{{.ID}}" data-aggregations="{{range .Aggregations}}{{.Name}}
{{end}}">
<h2>{{.ID}}</h2>
{{with .Health}}<p class="health live" data-part="health">{{with $c.WatermarkLagSeconds}}lag {{secs (deref .)}}{{else}}no W yet{{end}} ·
{{if or .Holder .HolderIsShared}}held by {{with .Holder}}{{pairs .}}{{else}}the shared source{{end}}{{with .HolderBehindSeconds}}, {{secs (deref .)}} behind the next source{{end}}{{else if gt .TiedSources 1}}held by {{.TiedSources}} sources together (within {{$.Tie}} of one another){{else}}held by {{$c.HeldBy}}{{end}} ·
<span{{if or (gt .LateRoutedPerSecond 0.0) (gt .LateDroppedPerSecond 0.0)}} class="bad"{{end}}>late routed {{perSec .LateRoutedPerSecond}}, dropped {{perSec .LateDroppedPerSecond}}{{if gt .LatePassedPerSecond 0.0}}, passed {{perSec .LatePassedPerSecond}}{{end}}</span> ·
{{if $c.OverdueWindows}}<span class="bad">{{$c.OverdueWindows}} window(s) overdue</span>{{else}}no window overdue{{end}} ·
{{with $c.Emission}}{{if .Failing}}<span class="bad">emission failing: {{.LastError}}</span>{{else if .QueuedPoints}}emission ok, {{.QueuedPoints}} points queued{{else}}emission ok{{end}}{{if .DroppedPoints}}, {{.DroppedPoints}} points dropped since the start{{end}}{{end}}
{{with $c.Checkpoint}} · {{if .Error}}<span class="bad">checkpoint failing: {{.Error}}</span>{{else if .Last}}checkpoint ok, last {{ts (derefTime .Last)}} UTC{{else}}no checkpoint yet{{end}}{{end}}</p>{{end}}
<p class="live" data-part="w">W <b class="w">{{if .Watermark}}{{ts (derefTime .Watermark)}}{{else}}none yet{{end}}</b> UTC, wall clock <span class="wall">{{ts .WallClock}}</span> UTC,
lag <b class="lag">{{if .WatermarkLagSeconds}}{{secs (deref .WatermarkLagSeconds)}}{{else}}-{{end}}</b>, held by {{.HeldBy}}.</p>
<svg class="wchart" width="720" height="130" role="img" aria-label="W lag behind the wall clock"></svg>
<div class="live" data-part="sources">{{if .Sources}}<h3>Sources ({{.SourcesTotal}})</h3><table class="sources"><tr><th>source</th><th>W (UTC)</th><th>last seen (UTC)</th><th></th></tr>
{{range .Sources}}<tr class="{{if .HoldsBack}}holds{{else if .AtW}}atw{{end}}{{if .Idle}} idle{{end}}"><td>{{if .Shared}}(shared){{else}}{{pairs .Source}}{{end}}</td>
<td>{{if .Watermark}}{{ts (derefTime .Watermark)}}{{end}}</td><td>{{ts .LastSeen}}</td><td>{{if .HoldsBack}}holds W back{{else if .AtW}}at W, with others{{else if .Idle}}idle{{end}}</td></tr>
{{end}}</table>{{end}}</div>
<div class="live" data-part="windows"><h3>Windows ({{.OpenWindows}} holding records)</h3>
<table class="windows"><tr><th>window (UTC)</th><th>fires at W</th><th>late records until W</th><th></th></tr>
{{range .Windows}}<tr{{if .OverdueSeconds}} class="overdue"{{end}}><td>{{ts .Start}} - {{ts .End}}</td><td>{{ts .FiresAtW}}</td><td>{{ts .ExpiresAtW}}</td><td>{{if .Fired}}fired{{else if .OverdueSeconds}}overdue by {{secs (deref .OverdueSeconds)}}{{else}}open{{end}}</td></tr>
{{end}}</table></div>
{{range $i, $a := .Aggregations}}<h3 class="aggregation" data-name="{{.Name}}">{{.Name}} ({{.Signal}})</h3>
<div class="live" data-part="aggregation.{{$i}}">
<p class="summary">series {{.Series}} of max_series {{.MaxSeries}}; {{.OpenWindows}} windows hold its records; records on time {{.Records.OnTime}}, late accepted {{.Records.LateAccepted}}, late routed {{.Records.LateRouted}}, dropped {{.Records.LateDropped}}, passed {{.Records.LatePassed}}, duplicates {{.Records.Duplicate}}, unmatched {{.Records.Unmatched}} (since the start)</p>
<table class="top"><tr><th>series with the most records in {{if .LastWindowFired}}the last closed window{{else}}the next window to fire{{end}}{{if .LastWindowEnd}} (ending {{ts (derefTime .LastWindowEnd)}} UTC){{end}}</th><th>records</th></tr>
{{range .TopSeries}}<tr><td>{{if .Overflow}}(overflow series){{else}}{{pairs .Series}}{{end}}</td><td>{{.Records}}</td></tr>
{{end}}</table></div>
<svg class="outcomes" data-aggregation="{{.Name}}" width="720" height="110" role="img" aria-label="records per second by outcome"></svg>
<svg class="late" data-aggregation="{{.Name}}" width="720" height="110" role="img" aria-label="late records per second by outcome"></svg>
<form class="explain" data-component="{{$id}}" data-aggregation="{{.Name}}" data-unit="{{.Unit}}" data-units="{{json .OutputUnits}}">Explain a series:
{{range .GroupBy}}<label>{{.}} <input name="key.{{.}}" size="12"></label> {{end}}<button type="submit">explain</button></form>
<div class="explanation"></div>
{{end}}
<div class="live" data-part="state">{{with .Checkpoint}}<p class="checkpoint">Checkpoint: {{if .Last}}last {{ts (derefTime .Last)}} UTC, {{.Bytes}} bytes{{else}}none yet{{end}}{{if .Error}} <span class="err">{{.Error}}</span>{{end}}</p>{{end}}
<p class="emission">Emission: {{.Emission.QueuedPoints}} points queued, {{.Emission.DroppedPoints}} dropped{{if .Emission.LastError}}; last error <span class="err">{{.Emission.LastError}}</span>{{end}}</p></div>
</section>
{{else}}<p id="none">No window_aggregator component is running in this collector.</p>
{{end}}</div>
<script>
"use strict";
// By component id, the extension's readings [{t, lag, recs}] earliest first: its history at load,
// then the readings taken since. The charts draw the last 300.
const hist = {};
let last = "";
const NS="http://www.w3.org/2000/svg";
const SPAN={{.RateSpan}};
function fmt(s){return s?new Date(s).toISOString().substring(11,23):""}
function hms(ms){return new Date(ms).toISOString().substring(11,19)}
function row(tag,cells){const tr=document.createElement("tr");cells.forEach(v=>{const c=document.createElement(tag);c.textContent=v;tr.appendChild(c)});return tr}
function svgEl(tag,attrs,text){const el=document.createElementNS(NS,tag);for(const k in attrs){el.setAttribute(k,attrs[k])}if(text!=null){el.textContent=text}return el}
// chart draws lines [{name, color, pts:[[t,y]]}] on one scale: the greatest y at the top left,
// the first and last times (UTC) under the axis, and a legend on the right. Each line's path
// carries its points in data-points.
function chart(svg, lines, unit){
  svg.replaceChildren();
  const w=+svg.getAttribute("width"), h=+svg.getAttribute("height"), left=48, right=w-130, top=8, bottom=h-18;
  const all=lines.flatMap(l=>l.pts);
  svg.appendChild(svgEl("line",{x1:left,y1:bottom,x2:right,y2:bottom,stroke:"#999"}));
  svg.appendChild(svgEl("line",{x1:left,y1:top,x2:left,y2:bottom,stroke:"#999"}));
  if(all.length<2){svg.appendChild(svgEl("text",{x:left+6,y:top+14,"font-size":11,fill:"#666"},"waiting for readings"));return}
  const x0=Math.min(...all.map(p=>p[0])), x1=Math.max(...all.map(p=>p[0])), y1=Math.max(...all.map(p=>p[1]))||1;
  const X=t=>left+(t-x0)/(x1-x0||1)*(right-left), Y=v=>bottom-(v/y1)*(bottom-top);
  svg.appendChild(svgEl("text",{x:left-4,y:top+9,"font-size":10,"text-anchor":"end",class:"ymax"},(+y1.toPrecision(3))+unit));
  svg.appendChild(svgEl("text",{x:left-4,y:bottom,"font-size":10,"text-anchor":"end"},"0"));
  svg.appendChild(svgEl("text",{x:left,y:h-4,"font-size":10},hms(x0)+" UTC"));
  svg.appendChild(svgEl("text",{x:right,y:h-4,"font-size":10,"text-anchor":"end"},hms(x1)+" UTC"));
  lines.forEach((l,i)=>{
    if(l.pts.length>1){svg.appendChild(svgEl("path",{d:l.pts.map((p,j)=>(j?"L":"M")+X(p[0]).toFixed(1)+","+Y(p[1]).toFixed(1)).join(""),fill:"none",stroke:l.color,class:"series","data-points":JSON.stringify(l.pts.map(p=>[p[0],+p[1].toFixed(3)]))}))}
    svg.appendChild(svgEl("rect",{x:right+10,y:top+i*15,width:10,height:10,fill:l.color}));
    svg.appendChild(svgEl("text",{x:right+24,y:top+i*15+9,"font-size":11},l.name));
  });
}
function remember(id,s){
  const h=hist[id]=hist[id]||[], t=Date.parse(s.wall_clock);
  if(h.length&&Object.keys(h[h.length-1].recs).join()!==Object.keys(s.records).join()){h.length=0}
  if(h.length&&h[h.length-1].t>=t){return}
  h.push({t,lag:s.watermark_lag_seconds,recs:s.records});if(h.length>300){h.splice(0,h.length-300)}
  if(!last||t>Date.parse(last)){last=s.wall_clock}
}
// perSecond is, at each reading, f's increase since the reading SPAN before it (fewer at the start)
// over the seconds between them: readings are a second apart, batches a fraction of one, and a rate
// over one reading would jump with how many batches fell between two.
function perSecond(h,f){return h.slice(1).map((p,j)=>{const q=h[Math.max(0,j+1-SPAN)];return[p.t,Math.max(0,f(p)-f(q))/Math.max(.001,(p.t-q.t)/1000)]})}
const outcomes=[["on time","on_time","#2da44e"],["duplicate","duplicate","#8250df"],["unmatched","unmatched","#57606a"]];
const lates=[["late accepted","late_accepted","#bf8700"],["late routed","late_routed","#cf222e"],["late dropped","late_dropped","#6e2c00"],["late passed","late_passed","#1f6feb"]];
function draw(sec){
  const h=hist[sec.dataset.id]||[];
  chart(sec.querySelector(".wchart"),[{name:"W lag, s",color:"#1f6feb",pts:h.filter(p=>p.lag!=null).map(p=>[p.t,p.lag])}]," s");
  sec.querySelectorAll("svg.outcomes,svg.late").forEach(svg=>{
    const a=svg.dataset.aggregation, rec=p=>p.recs[a]||{};
    chart(svg,(svg.classList.contains("late")?lates:outcomes).map(([name,k,color])=>({name,color,pts:perSecond(h,p=>rec(p)[k]||0)})),"/s");
  });
}
// refresh fetches the page again and swaps its live parts, and the readings taken since the last.
async function refresh(){
  try{
    const [page,hr]=await Promise.all([fetch("/"),fetch("/api/v1/history"+(last?"?since="+encodeURIComponent(last):""))]);
    const doc=new DOMParser().parseFromString(await page.text(),"text/html");
    const shape=d=>[...d.querySelectorAll("section.component")].map(s=>s.dataset.id+":"+s.dataset.aggregations).join("|");
    // components started, stopped or restarted with other aggregations: the page's sections are not theirs
    if(shape(doc)!==shape(document)){location.reload();return}
    document.querySelectorAll(".live").forEach(el=>{
      const sec=el.closest("section.component"), scope=sec?doc.querySelector('section.component[data-id="'+CSS.escape(sec.dataset.id)+'"]'):doc;
      const fresh=scope&&scope.querySelector('.live[data-part="'+el.dataset.part+'"]');
      if(fresh){el.replaceWith(document.importNode(fresh,true))}
    });
    (await hr.json()).forEach(c=>c.samples.forEach(s=>remember(c.id,s)));
    document.querySelectorAll("section.component").forEach(draw);
  }catch(e){document.getElementById("status").textContent="Cannot refresh: "+e}
}
function bars(svg, vals){
  const w=+svg.getAttribute("width"), h=+svg.getAttribute("height"), m=Math.max(1,...vals), bw=(w-50)/Math.max(1,vals.length);
  svg.appendChild(svgEl("text",{x:40,y:12,"font-size":10,"text-anchor":"end"},String(m)));
  vals.forEach((v,i)=>svg.appendChild(svgEl("rect",{x:45+i*bw,width:Math.max(1,bw-3),y:h-5-(v/m)*(h-15),height:(v/m)*(h-15),fill:"#1f6feb",class:"bar"})));
}
function table(head,rows){const t=document.createElement("table");t.appendChild(row("th",head));rows.forEach(r=>t.appendChild(row("td",r)));return t}
const num=v=>v==null?"":String(+v.toPrecision(6));
// the explainer's columns of every window: its outputs' column leaves them out
const columns=new Set(["avg","min","max"]);
// inUnit is a value with its unit: "5 ms"; a unit in braces ({span}/s) as it is.
const inUnit=(v,u)=>v==null?"":num(v)+(u&&u!=="1"?" "+u:"");
document.addEventListener("submit",async ev=>{
  const f=ev.target;if(!f.classList.contains("explain")){return}
  ev.preventDefault();
  const unit=f.dataset.unit, units=JSON.parse(f.dataset.units||"{}");
  const q=new URLSearchParams({component:f.dataset.component,aggregation:f.dataset.aggregation});
  new FormData(f).forEach((v,k)=>{if(v!==""){q.append(k,v)}});
  const out=f.nextElementSibling;out.replaceChildren();
  const r=await fetch("/api/v1/series?"+q);
  if(!r.ok){const p=document.createElement("p");p.className="err";p.textContent=await r.text();out.appendChild(p);return}
  const x=await r.json();
  const p=document.createElement("p");p.className="answer";out.appendChild(p);
  const ws=x.windows||[];
  p.textContent=x.found?ws.length+" window(s) hold its records now (times UTC).":"It holds no window now. "+x.why;
  if(ws.length){out.appendChild(table(["window","records","sum","fires at W","late records until W",""],
    ws.map(w=>[fmt(w.start)+" - "+fmt(w.end),String(w.records),inUnit(w.sum,unit),fmt(w.fires_at_watermark),fmt(w.expires_at_watermark),w.fired?"fired":w.overdue_seconds!=null?"overdue by "+w.overdue_seconds.toFixed(1)+" s":"open"])))}
  const lv=x.last_values||[];
  const s=document.createElement("p");s.className="last";out.appendChild(s);
  s.textContent=lv.length?"Its last emitted windows (kept since "+fmt(x.last_values_since)+" UTC):":x.last_values_since?"No emitted window yet: they are kept from the first question ("+fmt(x.last_values_since)+" UTC) on.":"No emitted window kept: they are kept once it is asked about while it has records.";
  if(lv.length){
    const svg=svgEl("svg",{width:360,height:70,class:"series-chart",role:"img","aria-label":"records of its last windows"});out.appendChild(svg);bars(svg,lv.map(w=>w.records));
    out.appendChild(table(["window","records","sum","avg","min","max","its outputs","late firings"],lv.map(w=>[fmt(w.start)+" - "+fmt(w.end),String(w.records),inUnit(w.sum,unit),inUnit(w.avg,unit),inUnit(w.min,unit),inUnit(w.max,unit),Object.entries(w.outputs||{}).filter(([k])=>!columns.has(k)).map(([k,v])=>k+" "+inUnit(v,units[k])).join(", "),String(w.late_firings)])));
  }
});
async function start(){
  try{(await (await fetch("/api/v1/history")).json()).forEach(c=>c.samples.forEach(s=>remember(c.id,s)))}catch(e){}
  document.querySelectorAll("section.component").forEach(draw);
  // a refresh starts a second after the last one ended: on a slow collector they do not pile up
  for(;;){await new Promise(r=>setTimeout(r,1000));await refresh()}
}
start();
</script></body></html>`

// defaultTop and maxTop bound the lists of a response (sources, windows): the first defaultTop
// unless ?top=N asks for others, at most maxTop, whatever the number of series.
const defaultTop, maxTop = 20, 1000
