"""Headless Chromium for the report tests (test helper): measure a page's layout and take screenshots.

``measure(page, width, height)`` opens a copy of the page with a measuring script appended (it runs after the
page's own script and reads the layout) in a ``width`` x ``height`` iframe of a wrapper page (headless Chromium
lays ``--dump-dom`` pages out at least 500 px wide, so a 390 px window needs the frame); the script posts the
numbers to the wrapper, which writes them into its DOM; ``--dump-dom`` returns them: scrollWidth, innerWidth,
the text shown in the first screen (not what a closed ``<details>`` hides), the elements
wider than the window, the plots drawn. Everything is local: a fresh profile, no network features.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
)

MEASURE = """
<script>(function(){
var d=document.documentElement, W=window.innerWidth, H=window.innerHeight;
var r={scrollWidth:d.scrollWidth, innerWidth:W, innerHeight:H, first:[], wide:[], plots:[], rowHeights:[]};
var all=document.body.getElementsByTagName('*');
for(var i=0;i<all.length;i++){var e=all[i], b=e.getBoundingClientRect();
 if(b.width===0&&b.height===0)continue;
 if(e.checkVisibility&&!e.checkVisibility())continue;
 if(b.right>W+0.5&&r.wide.length<20)r.wide.push(e.tagName+(e.id?'#'+e.id:'')+'.'
   +String(e.className.baseVal||e.className)+' '+Math.round(b.right));
 if(b.top<H&&b.bottom>0&&e.childElementCount===0&&e.textContent.trim())r.first.push(e.textContent.trim());}
var f=document.querySelectorAll('figure.plot');
for(var j=0;j<f.length;j++){r.plots.push({id:f[j].id, marks:f[j].querySelectorAll('polyline,rect,line').length,
 width:Math.round(f[j].getBoundingClientRect().width)});}
var rows=document.querySelectorAll('#results tr.node');
for(var k=0;k<rows.length&&k<50;k++)r.rowHeights.push(Math.round(rows[k].getBoundingClientRect().height));
parent.postMessage(JSON.stringify(r),'*');
})();</script>
"""


def chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.fail("chromium is not installed: apt-get install -y chromium (scripts/system-deps.sh)", pytrace=False)
    profile.mkdir(parents=True, exist_ok=True)
    argv = [exe, *FLAGS, f"--user-data-dir={profile}", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=180, check=True)


def measure(page: Path, width: int, height: int, work: Path) -> dict[str, Any]:
    """Layout numbers of ``page`` in a ``width`` x ``height`` window (see the module docstring)."""
    work.mkdir(parents=True, exist_ok=True)
    probe = work / f"measure-{width}x{height}-{page.name}"
    text = page.read_text(encoding="utf-8")
    probe.write_text(text.replace("</body>", MEASURE + "</body>", 1), encoding="utf-8")
    wrapper = work / f"frame-{width}x{height}-{page.name}"
    wrapper.write_text(
        '<!DOCTYPE html><html><head><meta charset="utf-8"><style>body{margin:0}iframe{border:0;display:block}</style>'
        f'</head><body><iframe src="{probe.name}" width="{width}" height="{height}"></iframe>'
        "<script>addEventListener('message',function(e){var p=document.createElement('pre');p.id='cvs-measure';"
        "p.textContent=e.data;document.body.appendChild(p);});</script></body></html>",
        encoding="utf-8",
    )
    dom = chromium(
        f"--window-size={max(width, 800)},{height + 50}",
        "--virtual-time-budget=2000",
        "--dump-dom",
        wrapper.as_uri(),
        profile=work / f"profile-dom-{width}",
    ).stdout
    m = re.search(r'<pre id="cvs-measure">(.*?)</pre>', dom, re.S)
    assert m, f"the measuring script did not run in {probe}: {dom[-2000:]}"
    import html

    return json.loads(html.unescape(m.group(1)))


def screenshot(page: Path, width: int, height: int, shot: Path, work: Path) -> Path:
    shot.parent.mkdir(parents=True, exist_ok=True)
    chromium(
        f"--window-size={width},{height}",
        f"--screenshot={shot}",
        page.as_uri(),
        profile=work / f"profile-shot-{width}",
    )
    return shot
