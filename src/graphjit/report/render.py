"""The report page: the structured log (``serialize.py``) rendered as one static HTML file.

Contract: :func:`render(log) <render>` returns the text of ``index.html``: no server, no
network resource (styles, script and the timeline chart are inline), readable from
disk.  Sections: the overview (counts and where the time went, the most frequent break
kinds), a timeline of compiles (an SVG chart: one row per frame, one bar per compile,
breaks marked), and one section per frame: its compiles, each with the recompile's
failing guard (expected and actual), the graphs (FX code and op table), the graph breaks
(reason, explanation, hints, the user's file:line with the source around it highlighted,
the chain of inlined frames), the guards, the original source and the transformed code
and resume functions as Python.  Every graph, break and compile has an anchor
(``#graph-3``, ``#break-1``, ``#compile-2``, ``#frame-0``) and links to the others; a search
box filters the frames by function name (``index.html?filter=NAME`` opens it filtered).
"""

from __future__ import annotations

import html
import io
import keyword
import time
import tokenize

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:14px 24px}header h1{margin:0;font-size:20px}
header .sub{opacity:.75;font-size:12px}main{padding:16px 24px;max-width:1200px}
section,.frame{background:#fff;border:1px solid #dde1e8;border-radius:6px;padding:12px 16px;margin:12px 0}
h2{font-size:17px;margin:4px 0 10px}h3{font-size:15px;margin:12px 0 6px}h4{font-size:13px;margin:10px 0 4px;color:#445}
.cards{display:flex;flex-wrap:wrap;gap:10px}.card{border:1px solid #dde1e8;border-radius:6px;padding:8px 14px;min-width:90px}
.card b{display:block;font-size:20px}.card span{font-size:12px;color:#556}
pre{background:#f3f4f7;border:1px solid #e1e4ea;border-radius:4px;padding:8px;overflow-x:auto;font:12px/1.4 ui-monospace,Menlo,Consolas,monospace;margin:4px 0}
.src .hl{background:#fff2b3;display:inline-block;width:100%}.ln{color:#99a;user-select:none}
.kw{color:#8a2be2}.str{color:#0a7d32}.com{color:#888;font-style:italic}.num{color:#b35c00}
.tag{display:inline-block;border-radius:3px;padding:0 6px;font-size:12px;margin-right:4px;background:#e8ebf1}
.t-compiled{background:#d7f2dd}.t-broke,.t-failed{background:#fbd9d9}.t-recompile{background:#ffe8c2}
.brk{border-left:4px solid #d9534f;padding:2px 10px;margin:8px 0}.rec{border-left:4px solid #f0ad4e;padding:2px 10px;margin:8px 0}
.hint{color:#0b5394}table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #e1e4ea;padding:2px 8px;text-align:left}
details>summary{cursor:pointer;color:#334}#search{font-size:14px;padding:4px 8px;width:280px}
a{color:#1a5fb4;text-decoration:none}a:hover{text-decoration:underline}svg text{font:11px system-ui,sans-serif}
"""

_JS = """
function gjFilter(q){q=q.toLowerCase();for(const f of document.querySelectorAll('.frame')){
f.style.display=f.dataset.name.toLowerCase().includes(q)?'':'none'}}
window.addEventListener('DOMContentLoaded',()=>{const q=new URLSearchParams(location.search).get('filter');
if(q){document.getElementById('search').value=q;gjFilter(q)}});
"""


def esc(text) -> str:
    return html.escape(str(text), quote=True)


def highlight(code: str) -> str:
    """Python source as HTML with keywords, strings, numbers and comments marked."""
    out, pos = [], 0
    lines = code.splitlines(keepends=True)
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln))
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type == tokenize.ENDMARKER or tok.start[0] > len(lines):
                break
            a = starts[tok.start[0] - 1] + tok.start[1]
            b = starts[tok.end[0] - 1] + tok.end[1] if tok.end[0] <= len(lines) else len(code)
            cls = ("kw" if tok.type == tokenize.NAME and keyword.iskeyword(tok.string) else
                   "str" if tok.type == tokenize.STRING else "com" if tok.type == tokenize.COMMENT else
                   "num" if tok.type == tokenize.NUMBER else None)
            if cls and a >= pos:
                out.append(esc(code[pos:a]))
                out.append(f'<span class="{cls}">{esc(code[a:b])}</span>')
                pos = b
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    out.append(esc(code[pos:]))
    return "".join(out)


def _pre(code: str, cls: str = "") -> str:
    return f'<pre class="{cls}">{highlight(code)}</pre>'


def _lines(lines, mark: int | None = None) -> str:
    rows = []
    for n, text in lines:
        body = f'<span class="ln">{n:5d}</span>  {highlight(text) if text.strip() else esc(text)}'
        rows.append(f'<span class="hl">{body}</span>' if n == mark else body)
    return '<pre class="src">' + "\n".join(rows) + "</pre>"


def _python(block: dict | None, title: str) -> str:
    if not block:
        return ""
    if block.get("python"):
        return f"<h4>{esc(title)}</h4>{_pre(block['python'])}"
    return (f"<h4>{esc(title)}</h4><p>Not decompiled: {esc(block.get('error'))}. Its bytecode:</p>"
            f"<pre>{esc(block.get('bytecode', ''))}</pre>")


def _seconds(s: float) -> str:
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


def render(log: dict) -> str:
    """``index.html`` for ``log`` (see the module docstring)."""
    s = log["summary"]
    parts = [f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
             f"<title>graphjit report</title><style>{_CSS}</style><script>{_JS}</script></head><body>",
             "<header><h1>graphjit report</h1><div class=sub>recorded "
             f"{esc(time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(log['started'])))}, "
             f"run {esc(_seconds(s['run_seconds']))}</div></header><main>"]
    parts.append(_overview(log))
    parts.append(_timeline(log))
    parts.append('<section><h2>Frames</h2><input id=search placeholder="filter by function name" '
                 'oninput="gjFilter(this.value)"></section>')
    for frame in log["frames"]:
        parts.append(_frame(log, frame))
    if log["skipped"]:
        parts.append("<section><h2>Frames that run in Python</h2><ul>"
                     + "".join(f"<li>{esc(x['text'])}</li>" for x in log["skipped"]) + "</ul></section>")
    parts.append("</main></body></html>")
    return "\n".join(parts)


def _overview(log: dict) -> str:
    s = log["summary"]
    cards = [("frames", s["frames"]), ("graphs", s["graphs"]), ("ops", s["ops"]), ("graph breaks", s["breaks"]),
             ("recompiles", s["recompiles"]), ("in Python", s["skipped"]),
             ("trace", _seconds(s["trace_seconds"])), ("backend", _seconds(s["backend_seconds"])),
             ("guards", f"{_seconds(s['guard_seconds'])} / {s['guard_checks']} checks")]
    out = ['<section id=overview><h2>Overview</h2><div class=cards>']
    out += [f"<div class=card><b>{esc(v)}</b><span>{esc(k)}</span></div>" for k, v in cards]
    out.append("</div>")
    if s["top_breaks"]:
        out.append("<h3>Most frequent break kinds</h3><table><tr><th>kind</th><th>count</th></tr>")
        first = {}
        for b in log["breaks"]:
            first.setdefault(b["kind"], b["id"])
        out += [f'<tr><td><a href="#break-{first[k]}">{esc(k)}</a></td><td>{n}</td></tr>' for k, n in s["top_breaks"]]
        out.append("</table>")
    out.append("<h3>Compiled frames</h3><table><tr><th>function</th><th>where</th><th>compiles</th>"
               "<th>graphs</th><th>breaks</th></tr>")
    for f in log["frames"]:
        comps = [log["compiles"][i] for i in f["compiles"]]
        out.append(f'<tr><td><a href="#frame-{f["id"]}">{esc(f["name"])}</a></td>'
                   f'<td>{esc(f["file"])}:{f["line"]}</td><td>{len(comps)}</td>'
                   f'<td>{sum(len(c["graphs"]) for c in comps)}</td><td>{sum(len(c["breaks"]) for c in comps)}</td></tr>')
    out.append("</table></section>")
    return "".join(out)


def _timeline(log: dict) -> str:
    comps = log["compiles"]
    if not comps:
        return "<section><h2>Timeline</h2><p>Nothing was compiled.</p></section>"
    end = max(max(c["start"] + c["seconds"] for c in comps), log["summary"]["run_seconds"], 1e-6)
    rows = {f["id"]: k for k, f in enumerate(log["frames"])}
    left, width, row_h = 180, 760, 18
    height = 30 + row_h * len(rows)
    out = [f'<section id=timeline><h2>Timeline of compiles</h2><svg width="{left + width + 20}" height="{height}" '
           f'role="img" aria-label="compiles over the run">']
    for f in log["frames"]:
        y = 20 + row_h * rows[f["id"]]
        out.append(f'<text x="4" y="{y + 12}"><a href="#frame-{f["id"]}">{esc(f["name"][:28])}</a></text>')
    for c in comps:
        y = 20 + row_h * rows[c["frame"]]
        x = left + width * c["start"] / end
        w = max(width * c["seconds"] / end, 2)
        color = "#f0ad4e" if c["recompile"] else "#d9534f" if c["breaks"] else "#5cb85c"
        out.append(f'<a href="#compile-{c["id"]}"><rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row_h - 4}" '
                   f'fill="{color}"><title>{esc(c["name"])}: {esc(_seconds(c["seconds"]))}'
                   f'{" (recompile)" if c["recompile"] else ""}</title></rect></a>')
    out.append(f'<line x1="{left}" y1="{height - 8}" x2="{left + width}" y2="{height - 8}" stroke="#889"/>'
               f'<text x="{left}" y="{height}">0</text><text x="{left + width - 40}" y="{height}">'
               f'{esc(_seconds(end))}</text>')
    out.append('</svg><div><span class="tag t-compiled">compile</span><span class="tag t-broke">with a graph break'
               '</span><span class="tag t-recompile">recompile</span></div></section>')
    return "".join(out)


def _frame(log: dict, frame: dict) -> str:
    out = [f'<div class=frame id="frame-{frame["id"]}" data-name="{esc(frame["name"])}">'
           f'<h2>{esc(frame["name"])} <span class=tag>{esc(frame["kind"])}</span></h2>'
           f'<div>{esc(frame["file"])}:{frame["line"]}</div>']
    src = frame["source"]
    if src.get("lines"):
        out.append(f"<details><summary>original source</summary>{_lines(src['lines'])}</details>")
    elif src:
        out.append(f"<details><summary>original code (decompiled)</summary>{_python(src, '')}</details>")
    for cid in frame["compiles"]:
        out.append(_compile(log, log["compiles"][cid]))
    out.append("</div>")
    return "".join(out)


def _compile(log: dict, c: dict) -> str:
    out = [f'<h3 id="compile-{c["id"]}">compile #{c["id"]} <span class="tag t-{esc(c["outcome"])}">'
           f'{esc(c["outcome"])}</span> at {esc(_seconds(c["start"]))}: {esc(_seconds(c["seconds"]))} '
           f'(trace {esc(_seconds(c["trace_seconds"]))}, backend {esc(_seconds(c["backend_seconds"]))})</h3>']
    if c["graphs"] or c["breaks"]:
        links = [f'<a href="#graph-{g}">{esc(log["graphs"][g]["name"])}</a>' for g in c["graphs"]]
        links += [f'<a href="#break-{b}">break: {esc(log["breaks"][b]["kind"])}</a>' for b in c["breaks"]]
        out.append(f"<div>{' · '.join(links)}</div>")
    if c["guard_checks"] is not None:
        out.append(f"<div>guard checks {c['guard_checks']}, hits {c['guard_hits']}, "
                   f"{esc(_seconds(c['guard_seconds']))}</div>")
    if c.get("cache"):
        out.append(f"<div>persistent cache: {esc(c['cache'])}</div>")
    r = c["recompile"]
    if r:
        prev = [i for i in log["frames"][c["frame"]]["compiles"] if i < c["id"]]
        links = ", ".join(f'<a href="#compile-{i}">#{i}</a>' for i in prev)
        out.append(f'<div class=rec><b>Recompile</b> (earlier: {links}): failing guard <code>{esc(r["check"])}</code>')
        if r["expected"] is not None:
            out.append(f'<br>expected <code>{esc(r["expected"])}</code>, actual <code>{esc(r["actual"])}</code>')
        out.append("</div>")
    if c["error"]:
        out.append(f"<div class=brk>{esc(c['error'])}</div>")
    for bid in c["breaks"]:
        out.append(_break(log, log["breaks"][bid]))
    for s in c["skipped"]:
        out.append(f"<div class=brk>runs in Python: {esc(s)}</div>")
    for gid in c["graphs"]:
        g = log["graphs"][gid]
        out.append(f'<h4 id="graph-{gid}">graph {esc(g["name"])}: {g["ops"]} ops, {g["inputs"]} inputs</h4>'
                   f'{_pre(g["code"])}<details><summary>op table</summary><pre>{esc(g["table"])}</pre></details>')
    out.append(_python(c["transformed"], "transformed code (as Python)"))
    for res in c["resumes"]:
        target = next((f for f in log["frames"] if f["name"] == res["name"]), None)
        link = f' (<a href="#frame-{target["id"]}">its compiles</a>)' if target else " (not called yet)"
        out.append(_python(res["python"], f"resume function {res['name']}") + link)
    if c["guards"]:
        out.append(f"<details><summary>guards ({len(c['guards'])})</summary><pre>"
                   + esc("\n".join(c["guards"])) + "</pre></details>")
    return "".join(out)


def _break(log: dict, b: dict) -> str:
    out = [f'<div class=brk id="break-{b["id"]}"><b>Graph break</b>: {esc(b["reason"])}']
    if b["compile"] is not None:
        out.append(f' (<a href="#compile-{b["compile"]}">compile #{b["compile"]}</a>')
        graphs = log["compiles"][b["compile"]]["graphs"]
        out += [f', graph before it: <a href="#graph-{g}">{esc(log["graphs"][g]["name"])}</a>' for g in graphs]
        out.append(")")
    if b["instruction"]:
        out.append(f"<div>at {esc(b['instruction'])}: {esc(b['resumed'])}</div>")
    if b["explanation"]:
        out.append(f"<div>{esc(b['explanation'])}</div>")
    out += [f"<div class=hint>Hint: {esc(h)}</div>" for h in b["hints"]]
    for k, f in enumerate(b["stack"]):
        inner = " (innermost)" if k == len(b["stack"]) - 1 and len(b["stack"]) > 1 else ""
        out.append(f"<div>{esc(f['file'])}:{f['line']} in {esc(f['name'])}{inner}</div>")
        if f["source"]:
            out.append(_lines(f["source"], f["line"]))
    out.append("</div>")
    return "".join(out)
