"""Self-contained annotation pages for human simulability studies (Lu et al., 2022, §3).

One static HTML file per work package: no server and no network (it works from
``file://``). It shows one task at a time (the shown words, the class names and "I don't
know"), answers by click or key (1..C for the classes, 0 for "I don't know", Backspace to go
back), shows progress, keeps every answer in the browser's local storage (a reload loses
nothing) and downloads the answers as JSON or CSV with the columns ``smat study score``
reads (worker, task_id, answer, plus seconds on the task).
"""

from __future__ import annotations

import html
import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from smat.evaluation.human_study import DONT_KNOW

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>__TITLE__</title>
<style>
body { font-family: system-ui, sans-serif; max-width: 46rem; margin: 2rem auto; padding: 0 1rem; }
#text { font-size: 1.3rem; line-height: 1.8; padding: 1rem; border: 1px solid #bbb;
        border-radius: 6px; min-height: 4rem; background: #fafafa; }
#choices button { font-size: 1.1rem; margin: .8rem .5rem 0 0; padding: .5rem 1rem; }
#choices button.chosen { outline: 3px solid #2a6; }
#progress { color: #555; margin-bottom: .5rem; }
#done { display: none; color: #2a6; font-weight: bold; margin-top: 1rem; }
.keys { color: #777; font-size: .9rem; }
</style></head>
<body>
<h1>Guess the label</h1>
<p>Only some words of each text are shown; the hidden ones are dots. Choose the label you
think the full text has, or "I don't know".</p>
<div id="progress"></div>
<div id="text"></div>
<div id="choices"></div>
<p class="keys">Keys: __KEYS__, 0 = I don't know, Backspace = previous task.</p>
<div id="done">All tasks answered. Download your answers and send the file back.</div>
<p><button id="back">Previous</button>
   <button id="download-json">Download JSON</button>
   <button id="download-csv">Download CSV</button></p>
<script id="study" type="application/json">__DATA__</script>
<script>
const study = JSON.parse(document.getElementById("study").textContent);
const key = "smat-study:" + study.study + ":" + study.worker;
const saved = JSON.parse(localStorage.getItem(key) || "{}");
const answers = saved.answers || {};
let index = saved.index || 0;
let shownAt = Date.now();
function save() { localStorage.setItem(key, JSON.stringify({answers: answers, index: index})); }
function render() {
  const done = index >= study.tasks.length;
  document.getElementById("done").style.display = done ? "block" : "none";
  const answered = Object.keys(answers).length;
  document.getElementById("progress").textContent =
    "Task " + Math.min(index + 1, study.tasks.length) + " of " + study.tasks.length +
    " (" + answered + " answered)";
  const choices = document.getElementById("choices");
  choices.innerHTML = "";
  if (done) { document.getElementById("text").textContent = ""; return; }
  const task = study.tasks[index];
  document.getElementById("text").textContent = task.text;
  const options = task.classes.concat([study.dont_know]);
  options.forEach(function (option, i) {
    const button = document.createElement("button");
    button.textContent = option;
    button.dataset.answer = option;
    if (answers[task.task_id] && answers[task.task_id].answer === option) {
      button.className = "chosen";
    }
    button.onclick = function () { answer(option); };
    choices.appendChild(button);
  });
  shownAt = Date.now();
}
function answer(option) {
  if (index >= study.tasks.length) return;
  const task = study.tasks[index];
  answers[task.task_id] = {answer: option, seconds: (Date.now() - shownAt) / 1000};
  index += 1;
  save();
  render();
}
function back() { if (index > 0) { index -= 1; save(); render(); } }
document.addEventListener("keydown", function (event) {
  if (event.key === "Backspace") { event.preventDefault(); back(); return; }
  if (!/^[0-9]$/.test(event.key) || index >= study.tasks.length) return;
  const n = Number(event.key);
  const classes = study.tasks[index].classes;
  if (n === 0) answer(study.dont_know);
  else if (n <= classes.length) answer(classes[n - 1]);
});
function rows() {
  return study.tasks.filter(function (t) { return answers[t.task_id]; }).map(function (t) {
    return {worker: study.worker, task_id: t.task_id, answer: answers[t.task_id].answer,
            seconds: answers[t.task_id].seconds};
  });
}
function download(name, type, content) {
  const link = document.createElement("a");
  link.href = URL.createObjectURL(new Blob([content], {type: type}));
  link.download = name;
  document.body.appendChild(link);
  link.click();
  link.remove();
}
function csvCell(value) { return '"' + String(value).replace(/"/g, '""') + '"'; }
document.getElementById("back").onclick = back;
document.getElementById("download-json").onclick = function () {
  download("answers-" + study.worker + ".json", "application/json",
           JSON.stringify(rows(), null, 1));
};
document.getElementById("download-csv").onclick = function () {
  const lines = ["worker,task_id,answer,seconds"].concat(rows().map(function (r) {
    return [r.worker, r.task_id, r.answer, r.seconds].map(csvCell).join(",");
  }));
  download("answers-" + study.worker + ".csv", "text/csv", lines.join("\\n") + "\\n");
};
render();
</script>
</body></html>
"""


def annotation_page(tasks: Sequence[dict[str, Any]], *, worker: str, study: str) -> str:
    """The HTML of one work package: `tasks` (each with "task_id", "text", "classes") in
    the order the person sees them."""
    if not tasks:
        raise ValueError(f"worker {worker!r} has no tasks")
    classes = max((t["classes"] for t in tasks), key=len)
    keys = ", ".join(f"{i} = {name}" for i, name in enumerate(classes, start=1))
    data = {"study": study, "worker": worker, "dont_know": DONT_KNOW,
            "tasks": [{"task_id": t["task_id"], "text": t["text"],
                       "classes": list(t["classes"])} for t in tasks]}
    # "</" would end the JSON script element early
    payload = json.dumps(data).replace("</", "<\\/")
    return (_PAGE.replace("__TITLE__", html.escape(f"{study} - {worker}"))
            .replace("__KEYS__", html.escape(keys)).replace("__DATA__", payload))


def write_annotation_pages(study: dict[str, Any], output_dir: str | Path, *,
                           name: str = "study") -> list[Path]:
    """One ``pages/annotator{n}.html`` per work package of a built study (its "tasks" and
    "packages"); returns the files written."""
    by_id = {t["task_id"]: t for t in study["tasks"]}
    packages: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for slot in sorted(study["packages"], key=lambda s: s["position"]):
        packages[slot["annotator"]].append(by_id[slot["task_id"]])
    folder = Path(output_dir) / "pages"
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for annotator, tasks in sorted(packages.items()):
        path = folder / f"annotator{annotator}.html"
        path.write_text(annotation_page(tasks, worker=f"annotator{annotator}", study=name))
        written.append(path)
    return written
