/// The live status page served at `GET /`: self-contained (no external assets). It polls
/// `/api/v1/status` twice a second, follows `/api/v1/events`, and draws a timeline of the last
/// minutes: who was audible in each zone, with interruption began/ended markers.
enum StatusPage {
    static let html = #"""
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><title>Baton</title>
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <style>
        :root{--bg:#f6f7f9;--card:#fff;--line:#dde1e6;--text:#1d2327;--dim:#68737d;--ok:#1a7f37;--bad:#c62828;--warn:#b26a00}
        *{box-sizing:border-box}body{font:14px/1.4 system-ui,sans-serif;margin:0;padding:1.2em 1.5em;color:var(--text);background:var(--bg)}
        h1{font-size:1.35em;margin:0 0 .2em}h2{font-size:1.05em;margin:1.2em 0 .4em}
        .sub{color:var(--dim);margin-bottom:.8em}
        #zones{display:grid;grid-template-columns:repeat(auto-fill,minmax(330px,1fr));gap:.8em}
        .zone{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:.7em 1em}
        .zone h3{margin:0 0 .3em;font-size:1.05em;display:flex;justify-content:space-between}
        .badge{font-size:.8em;padding:.05em .5em;border-radius:1em;color:#fff}
        .available{background:var(--ok)}.unavailable{background:var(--bad)}
        .kv{color:var(--dim);font-size:.9em}.kv b{color:var(--text);font-weight:600}
        .src{display:flex;justify-content:space-between;border-top:1px solid var(--line);padding:.25em 0}
        .state-playing{color:var(--ok)}.state-ducked{color:var(--warn)}.state-interrupted,.state-paused{color:var(--bad)}.state-queued{color:var(--dim)}
        .gain{display:inline-block;width:70px;height:8px;background:#e8eaed;border-radius:4px;vertical-align:middle;margin-left:.4em}
        .gain i{display:block;height:8px;border-radius:4px;background:var(--ok)}
        table{border-collapse:collapse;width:100%;background:var(--card);border:1px solid var(--line);border-radius:8px}
        td,th{padding:.3em .6em;text-align:left;border-bottom:1px solid var(--line)}th{color:var(--dim);font-weight:500}
        #timeline{background:var(--card);border:1px solid var(--line);border-radius:8px;width:100%}
        #events{font:12px ui-monospace,monospace;max-height:16em;overflow:auto;background:var(--card);border:1px solid var(--line);border-radius:8px;padding:.4em .6em}
        #events div{white-space:nowrap}
        .err{color:var(--bad)}
        </style></head><body>
        <h1>Baton</h1><div class="sub" id="sub">connecting…</div>
        <div id="zones"></div>
        <h2>Sources</h2>
        <table id="sources"><thead><tr><th>source</th><th>class</th><th>sound</th><th>state</th><th>zones</th><th>position</th></tr></thead><tbody></tbody></table>
        <h2>Timeline <span class="kv">(last 3 minutes: who was audible in each zone; ▼ interruption began, ▲ ended)</span></h2>
        <svg id="timeline" height="60"></svg>
        <h2>Events</h2><div id="events"></div>
        <script>
        "use strict";
        const WINDOW=180000, esc=s=>String(s).replace(/[&<>"]/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c]));
        // The timeline is rebuilt from the event log (the stream replays the kept history first), so it shows
        // the last minutes even right after the page is opened. Times are the daemon's uptime in ms.
        const events=[]; let zoneNames=[], uptime=0, uptimeAt=Date.now();
        const colors={}; const palette=['#3b82f6','#f59e0b','#10b981','#ef4444','#8b5cf6','#14b8a6','#ec4899','#84cc16'];
        function color(id){if(!colors[id])colors[id]=palette[Object.keys(colors).length%palette.length];return colors[id];}
        function gainBar(g){return `<span class="gain"><i style="width:${Math.round(Math.min(1,g)*100)}%"></i></span>`;}
        function nowMs(){return uptime+(Date.now()-uptimeAt);}
        function render(s){
          zoneNames=s.zones.map(z=>z.name);uptime=s.uptimeMs;uptimeAt=Date.now();
          document.getElementById('sub').textContent=`up ${(s.uptimeMs/1000).toFixed(0)} s · ${s.zones.length} zones · ${s.sources.length} sources`;
          document.getElementById('zones').innerHTML=s.zones.map(z=>{
            const state=id=>{const x=s.sources.find(q=>q.id===id);return x?x.state:'';};
            const here=id=>{const m=z.silenced.find(q=>q.source===id);if(m)return['muted by '+m.by,'interrupted'];
              const d=z.ducked.find(q=>q.source===id);if(d)return['ducked '+d.levelDb+' dB by '+d.by,'ducked'];return[state(id),state(id)];};
            const rows=z.sources.map(g=>{const [label,cls]=here(g.source);return `<div class="src" data-source="${esc(g.source)}"><span>${esc(g.source)} <span class="state-${esc(cls)}">${esc(label)}</span></span><span>gain ${g.gain.toFixed(2)}${gainBar(g.gain)}</span></div>`;}).join('');
            const queued=z.queued.length?`<div class="kv">queued: <b>${z.queued.map(esc).join(', ')}</b></div>`:'';
            return `<div class="zone" data-zone="${esc(z.name)}"><h3>${esc(z.name)} <span class="badge ${esc(z.state)}">${esc(z.state)}</span></h3>
              <div class="kv">${esc(z.pcm)} · ${z.rate} Hz · ${z.channels} ch · ${esc(z.format)} · clock ${esc(z.clock)}</div>
              <div class="kv">holder: <b>${z.audible.map(esc).join(', ')||'—'}</b> · volume <b>${Math.round(z.volume*100)}%</b> · xruns <b>${z.xruns}</b> · level <b class="level">${z.level.peakDb.toFixed(1)} / ${z.level.rmsDb.toFixed(1)} dBFS</b> <span class="kv">(peak / RMS)</span> · played <b>${(z.framesPlayed/z.rate).toFixed(1)} s</b></div>
              ${z.error?`<div class="err">${esc(z.error)}</div>`:''}${queued}${rows||'<div class="kv">silent</div>'}</div>`;}).join('');
          document.querySelector('#sources tbody').innerHTML=s.sources.map(x=>`<tr data-source="${esc(x.id)}"><td>${esc(x.id)}</td><td>${esc(x.class)}</td><td>${esc(x.sound)}</td>
            <td class="state-${esc(x.state)}">${esc(x.state)}${x.interruptedBy?' by '+esc(x.interruptedBy):''}</td><td>${x.zones.map(esc).join(', ')}</td>
            <td>${x.positionSeconds!=null?x.positionSeconds.toFixed(2)+' s':''}</td></tr>`).join('')||'<tr><td colspan="6" class="kv">no sources</td></tr>';
          drawTimeline();
        }
        // Who was audible where, from the events: [{zone, id, from, to}] plus began/ended markers.
        function intervals(){
          const granted={}, open={}, out=[], marks=[], muted={};
          const start=(z,id,t)=>{const k=z+'|'+id;if(!(k in open))open[k]=t;};
          const stop=(z,id,t)=>{const k=z+'|'+id;if(k in open){out.push({zone:z,id,from:open[k],to:t});delete open[k];}};
          for(const e of events){const t=e.uptimeMs,id=e.source;
            switch(e.type){
              case 'granted':granted[id]=e.zones||[];granted[id].forEach(z=>start(z,id,t));break;
              case 'muted':(e.zones||[]).forEach(z=>{muted[z+'|'+id]=1;stop(z,id,t);});break;
              case 'unmuted':(e.zones||[]).forEach(z=>{delete muted[z+'|'+id];start(z,id,t);});break;
              case 'interruption-began':(granted[id]||[]).forEach(z=>stop(z,id,t));marks.push({t,began:true,zones:granted[id]||[]});break;
              case 'interruption-ended':marks.push({t,began:false,zones:granted[id]||[]});
                if(e.shouldResume)(granted[id]||[]).forEach(z=>{if(!muted[z+'|'+id])start(z,id,t);});break;
              case 'finished':case 'lost-for-good':(granted[id]||[]).forEach(z=>stop(z,id,t));delete granted[id];break;
            }}
          const n=nowMs();for(const k in open){const [z,id]=k.split('|');out.push({zone:z,id,from:open[k],to:n});}
          return {out,marks};
        }
        function drawTimeline(){
          const svg=document.getElementById('timeline'),W=svg.clientWidth||900,rowH=22,left=90,h=zoneNames.length*rowH+18,now=nowMs();
          svg.setAttribute('height',h);let out='';const {out:bars,marks}=intervals();
          const x=t=>left+(W-left-10)*Math.max(0,1-(now-t)/WINDOW);
          zoneNames.forEach((z,i)=>{const y=i*rowH+4;
            out+=`<text x="4" y="${y+14}" font-size="12">${esc(z)}</text><rect x="${left}" y="${y}" width="${W-left-10}" height="${rowH-6}" fill="#f1f3f5"/>`;
            const here=bars.filter(b=>b.zone===z&&b.to>now-WINDOW);
            here.forEach(b=>{const lanes=here.filter(o=>o.from<b.to&&o.to>b.from).length,lane=here.filter(o=>o.from<b.to&&o.to>b.from).indexOf(b);
              out+=`<rect class="bar" data-source="${esc(b.id)}" x="${x(b.from)}" y="${y+lane*(rowH-6)/lanes}" width="${Math.max(1,x(b.to)-x(b.from))}" height="${(rowH-6)/lanes}" fill="${color(b.id)}"><title>${esc(b.id)}</title></rect>`;});
            marks.filter(m=>m.t>now-WINDOW&&m.zones.includes(z)).forEach(m=>{
              out+=`<text x="${x(m.t)-4}" y="${y+(m.began?10:rowH-4)}" font-size="10" fill="#c62828">${m.began?'▼':'▲'}</text>`;});});
          out+=`<text x="${left}" y="${h-2}" font-size="10" fill="#68737d">−3 min</text><text x="${W-40}" y="${h-2}" font-size="10" fill="#68737d">now</text>`;
          const legend=[...new Set(bars.map(b=>b.id))].slice(-8).map(id=>`<tspan fill="${color(id)}">■</tspan> ${esc(id)}`).join('  ');
          svg.innerHTML=out+`<text x="${left+60}" y="${h-2}" font-size="10">${legend}</text>`;
        }
        // Beyond loopback the API wants a bearer token: from the address (#token=…, then dropped from it)
        // or asked for once, kept for this tab only.
        const hashToken=new URLSearchParams(location.hash.slice(1)).get('token');
        if(hashToken){sessionStorage.setItem('batonToken',hashToken);history.replaceState(null,'',location.pathname);}
        let token=sessionStorage.getItem('batonToken');
        async function refresh(){try{const r=await fetch('/api/v1/status',token?{headers:{Authorization:'Bearer '+token}}:{});
          if(r.status===401){const t=prompt('batond wants its API token (the first line of api.token-file):');if(t){token=t;sessionStorage.setItem('batonToken',t);location.reload();}
            document.getElementById('sub').textContent='batond needs its API token (open this page as /#token=…)';return;}
          render(await r.json());}catch(e){document.getElementById('sub').textContent='batond is not reachable';}}
        const log=document.getElementById('events');
        const es=new EventSource('/api/v1/events?after=0'+(token?'&access_token='+encodeURIComponent(token):''));
        ['granted','queued','rejected','coalesced','expired','lost-for-good','finished','played','interruption-began','interruption-ended',
         'duck-began','duck-ended','muted','unmuted','zone-available','zone-unavailable','volume','volume-control','track','scrobbled',
         'stream-error','state-error','reloaded','reload-rejected'].forEach(t=>
          es.addEventListener(t,m=>{const e=JSON.parse(m.data);
            events.push(e);
            const d=document.createElement('div');d.className='ev ev-'+t;
            d.textContent=`${e.time.slice(11,23)} ${e.type} ${e.source||''}${e.zones?' ['+e.zones.join(',')+']':''}${e.shouldResume!=null?' shouldResume='+e.shouldResume:''} — ${e.reason||''}`;
            log.prepend(d);refresh();}));
        refresh();setInterval(refresh,500);setInterval(drawTimeline,250);
        </script></body></html>
        """#
}
