/// The live status page served at `GET /`: self-contained (no external assets); it polls
/// `/api/v1/status` and follows `/api/v1/events`.
enum StatusPage {
    static let html = #"""
<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Baton</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222;background:#fafafa}
h1{font-size:1.3em;margin:0 0 .6em}
.zone{background:#fff;border:1px solid #ddd;border-radius:6px;padding:.6em 1em;margin:.5em 0}
.zone h2{font-size:1.05em;margin:.2em 0}
.bad{color:#b00}.ok{color:#070}
table{border-collapse:collapse}td,th{padding:.15em .6em;text-align:left;border-bottom:1px solid #eee}
#events{font:12px ui-monospace,monospace;max-height:22em;overflow:auto;background:#fff;border:1px solid #ddd;padding:.4em}
</style></head><body>
<h1>Baton</h1>
<div id="zones">loading…</div>
<h2>Sources</h2><table id="sources"><tr><th>source</th><th>class</th><th>state</th><th>zones</th><th>position</th></tr></table>
<h2>Events</h2><div id="events"></div>
<script>
const esc=s=>String(s).replace(/[&<>"]/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c]));
async function refresh(){
  try{
    const s=await (await fetch('/api/v1/status')).json();
    document.getElementById('zones').innerHTML=s.zones.map(z=>`<div class="zone"><h2>${esc(z.name)}
      <span class="${z.state==='available'?'ok':'bad'}">${esc(z.state)}</span></h2>
      <div>PCM ${esc(z.pcm)} · ${z.rate} Hz · ${z.channels} ch · ${esc(z.format)} · clock ${esc(z.clock)} ·
      xruns ${z.xruns} · played ${(z.framesPlayed/z.rate).toFixed(1)} s${z.error?` · <span class="bad">${esc(z.error)}</span>`:''}</div>
      <div>audible: ${z.audible.map(esc).join(', ')||'—'} · ducked: ${z.ducked.map(d=>esc(d.source)+' '+d.levelDb+' dB').join(', ')||'—'}
      · silenced: ${z.silenced.map(d=>esc(d.source)+' by '+esc(d.by)).join(', ')||'—'} · queued: ${z.queued.map(esc).join(', ')||'—'}</div>
      <div>gains: ${z.sources.map(g=>esc(g.source)+' '+g.gain.toFixed(2)).join(', ')||'—'}</div></div>`).join('');
    document.getElementById('sources').innerHTML='<tr><th>source</th><th>class</th><th>state</th><th>zones</th><th>position</th></tr>'+
      s.sources.map(x=>`<tr><td>${esc(x.id)}</td><td>${esc(x.class)}</td><td>${esc(x.state)}${x.interruptedBy?' by '+esc(x.interruptedBy):''}</td>
      <td>${x.zones.map(esc).join(', ')}</td><td>${x.positionSeconds!=null?x.positionSeconds.toFixed(2)+' s':''}</td></tr>`).join('');
  }catch(e){document.getElementById('zones').textContent='daemon not reachable';}
}
const log=document.getElementById('events');
const es=new EventSource('/api/v1/events?after=0');
es.onmessage=null;
['granted','queued','rejected','coalesced','expired','lost-for-good','finished','played','interruption-began',
 'interruption-ended','duck-began','duck-ended','muted','unmuted','zone-available','zone-unavailable'].forEach(t=>
  es.addEventListener(t,m=>{const e=JSON.parse(m.data);const d=document.createElement('div');
    d.textContent=`${e.time} ${e.type} ${e.source||''} ${e.zones?'['+e.zones.join(',')+']':''} ${e.shouldResume!=null?'shouldResume='+e.shouldResume:''} — ${e.reason||''}`;
    log.prepend(d);refresh();}));
refresh();setInterval(refresh,1000);
</script></body></html>
"""#
}
