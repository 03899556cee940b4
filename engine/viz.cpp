#include "engine/viz.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "engine/codegen/lowerer.h"
#include "engine/codegen/pipeline.h"
#include "engine/device.h"
#include "engine/kernel_cache.h"
#include "engine/pattern.h"
#include "engine/realize.h"
#include "engine/roofline.h"
#include "engine/settings.h"

namespace mg {
namespace {

std::string html_escape(const std::string& s) {
  std::string r;
  for (char c : s)
    switch (c) {
    case '&':
      r += "&amp;";
      break;
    case '<':
      r += "&lt;";
      break;
    case '>':
      r += "&gt;";
      break;
    case '"':
      r += "&quot;";
      break;
    default:
      r += c;
    }
  return r;
}

std::string dot_escape(const std::string& s) {
  std::string r;
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    r += c == '\n' ? ' ' : c;
  }
  return r;
}

std::string shorten(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n - 3) + "..."; }

// The fill colour says what kind of op a node is.
const char* color(Ops op) {
  switch (op) {
  case Ops::REDUCE_AXIS:
  case Ops::REDUCE:
  case Ops::DEFINE_ACC:
    return "#ffd59e";
  case Ops::LOAD:
  case Ops::STORE:
  case Ops::INDEX:
    return "#c8e6c9";
  case Ops::BUFFER:
  case Ops::DEFINE_GLOBAL:
  case Ops::DEFINE_LOCAL:
    return "#b3e5fc";
  case Ops::RANGE:
  case Ops::ENDRANGE:
  case Ops::SPECIAL:
    return "#e1bee7";
  case Ops::CONST:
    return "#fff9c4";
  case Ops::SINK:
    return "#dddddd";
  default:
    return is_movement(op) || op == Ops::VIEW ? "#eeeeee" : "#ffffff";
  }
}

// One node's label: the op, its dtype, and its argument (shortened; the whole one is the tooltip).
std::string label(const UOp* u, std::string* full_arg) {
  std::string a = u->arg_string();
  if (u->op == Ops::RESHAPE || u->op == Ops::EXPAND) a = shape_str(u->shape);
  if (u->op == Ops::BUFFER || u->op == Ops::REDUCE_AXIS) a = shape_str(u->shape) + (a.empty() ? "" : " " + a);
  *full_arg = a;
  std::string l = std::string(name(u->op)) + " " + name(u->dtype);
  if (!a.empty()) l += "\\n" + dot_escape(shorten(a, 40));
  return l;
}

struct Graph {
  std::string dot;
  size_t nodes = 0, edges = 0;
};

// The nodes of `roots` as DOT statements, sources above their users; `prefix` keeps the ids of
// one cluster apart from another's (kernels share nodes such as DEFINE_GLOBAL 0).
void add_nodes(std::ostringstream& os, const std::vector<UOpRef>& roots, const std::string& prefix,
               Graph& g) {
  std::unordered_map<const UOp*, size_t> id;
  for (auto& r : roots)
    for (const UOp* u : toposort(r.get())) {
      if (id.count(u)) continue;
      size_t i = id.size();
      id[u] = i;
      std::string arg;
      std::string l = label(u, &arg);
      os << "  " << prefix << i << " [label=\"" << l << "\", fillcolor=\"" << color(u->op) << "\", tooltip=\""
         << dot_escape(shorten(arg, 400)) << "\"];\n";
      for (auto& s : u->src)
        os << "  " << prefix << id.at(s.get()) << " -> " << prefix << i << ";\n";
      g.edges += u->src.size();
    }
  g.nodes += id.size();
}

const char* kDotHead = "digraph G {\n  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", "
                       "fontsize=10, height=0.3];\n  edge [arrowsize=0.6, color=\"#555555\"];\n";

// A DOT graph: the shared head, what `body` writes (it counts the nodes and edges), the closing brace.
template <class F> Graph dot_graph(F body) {
  std::ostringstream os;
  Graph g;
  os << kDotHead;
  body(os, g);
  os << "}\n";
  g.dot = os.str();
  return g;
}

Graph graph_of(const std::vector<UOpRef>& roots) {
  return dot_graph([&](std::ostringstream& os, Graph& g) { add_nodes(os, roots, "n", g); });
}

Graph schedule_graph(const std::vector<ScheduleItem>& items) {
  return dot_graph([&](std::ostringstream& os, Graph& g) {
    for (size_t k = 0; k < items.size(); k++) {
      os << " subgraph cluster_" << k << " {\n  label=\"kernel " << k + 1
         << ": why a kernel: " << dot_escape(items[k].reason)
         << "\"; style=\"rounded\"; color=\"#888888\"; fontname=\"Helvetica\";\n";
      add_nodes(os, {items[k].ast}, "k" + std::to_string(k) + "_", g);
      os << " }\n";
    }
  });
}

// A fresh file in the temp directory, made with O_EXCL (no one else's file, no symlink followed),
// holding `text`; removed with the object.
struct TempFile {
  std::string path;
  TempFile(const std::string& stem, const std::string& text) {
    std::string tmpl = (std::filesystem::temp_directory_path() / (stem + "XXXXXX")).string();
    int fd = mkstemp(tmpl.data());
    if (fd < 0) throw std::runtime_error("VIZ: cannot make a file in " + tmpl);
    path = tmpl;
    bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ok &= ::close(fd) == 0;
    if (!ok) throw std::runtime_error("VIZ: cannot write " + path);
  }
  ~TempFile() {
    std::error_code ec; // renamed away already, or gone: nothing to do
    std::filesystem::remove(path, ec);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
};

std::string shell_quote(const std::string& s) {
  std::string r = "'";
  for (char c : s)
    r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

// Graphviz's layout as SVG, or why there is none: `dot` in a subprocess, stopped after `seconds`.
// A graph that dot cannot lay out in time (or at all) is shown as text instead; only a missing dot
// is an error, since then no graph can be drawn.
struct Layout {
  std::string svg, why_not;
};
Layout run_dot(const std::string& dot, double seconds) {
  TempFile in("mg-viz-", dot), err("mg-viz-err-", "");
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.3g", seconds);
  // -k: a dot that ignores SIGTERM is killed a second later
  std::string cmd = std::string("timeout -k 1 ") + secs + " dot -Tsvg " + shell_quote(in.path) + " 2>" +
                    shell_quote(err.path);
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("VIZ: cannot run Graphviz's dot");
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0)
    out.append(buf, n);
  int rc = pclose(p);
  if (rc != 0) {
    std::ifstream e(err.path);
    std::string msg((std::istreambuf_iterator<char>(e)), std::istreambuf_iterator<char>());
    int code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    if (code == 127)
      throw std::runtime_error(
          "VIZ needs Graphviz's dot to lay out the graphs (Debian: apt install graphviz)");
    if (code == 124 || code == 137) return {"", std::string("Graphviz's dot took over ") + secs + " s"};
    return {"", "Graphviz's dot failed: " + shorten(msg, 300)};
  }
  size_t svg = out.find("<svg");
  if (svg == std::string::npos) return {"", "Graphviz's dot wrote no SVG"};
  return {out.substr(svg), ""};
}

// The time left for the layouts of one page (of one realize's part, for VIZ=1): after it is
// spent, the graphs still to come are shown as text, so the page is written within seconds.
class DotClock {
public:
  DotClock()
      : end_(std::chrono::steady_clock::now() +
             std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                 std::chrono::duration<double>(kVizDotPageSeconds))) {}
  double left() const {
    return std::chrono::duration<double>(end_ - std::chrono::steady_clock::now()).count();
  }

private:
  std::chrono::steady_clock::time_point end_;
};

// ---- the linear program as a listing, with unrolled repetition folded

// A line's shape: the line with each number blanked ("  12 ADD float32 [10, 11]" and
// "  37 ADD float32 [35, 36]" are alike). A number starts at a digit that no letter or digit
// precedes, so the digits of "float32" or "gidx0" are kept. The spaces that right-align the line's
// number are dropped with it.
std::string line_shape(const std::string& line) {
  std::string r;
  for (size_t i = line.find_first_not_of(' '); i < line.size();) {
    bool starts = std::isdigit(static_cast<unsigned char>(line[i])) &&
                  (i == 0 || !std::isalnum(static_cast<unsigned char>(line[i - 1])));
    if (!starts) {
      r += line[i++];
      continue;
    }
    while (i < line.size() &&
           (std::isdigit(static_cast<unsigned char>(line[i])) || line[i] == '.' ||
            (line[i] == 'e' && i + 1 < line.size() &&
             (std::isdigit(static_cast<unsigned char>(line[i + 1])) || line[i + 1] == '-'))))
      i += line[i] == 'e' ? 2 : 1;
    r += '#';
  }
  return r;
}

// Writes lines as HTML: a run of copies of one block of lines (an UNROLLed or UPCASTed body: the
// same ops, other numbers) shows its first copy, then "... repeated N more times" that opens to
// the others. Each copy is folded the same way inside.
class Folder {
public:
  explicit Folder(const std::vector<std::string>& lines) : lines_(lines) {
    std::unordered_map<std::string, int> ids;
    for (auto& l : lines)
      shape_.push_back(ids.emplace(line_shape(l), static_cast<int>(ids.size())).first->second);
  }
  std::string html() {
    write(0, lines_.size());
    flush();
    return out_;
  }

private:
  static constexpr size_t kMaxPeriod = 512; // the longest block looked for, in lines
  static constexpr size_t kMinHidden = 4;   // fewer lines are not worth a fold

  bool alike(size_t a, size_t b, size_t n) const {
    for (size_t k = 0; k < n; k++)
      if (shape_[a + k] != shape_[b + k]) return false;
    return true;
  }
  // The block length p and copy count c that cover the most lines from `at` (the shortest block
  // of those that cover as many).
  std::pair<size_t, size_t> run_at(size_t at, size_t end) const {
    size_t best_p = 1, best_c = 1;
    for (size_t p = 1; p <= kMaxPeriod && at + 2 * p <= end; p++) {
      size_t c = 1;
      while (at + (c + 1) * p <= end && alike(at, at + c * p, p))
        c++;
      if (c > 1 && p * c > best_p * best_c) best_p = p, best_c = c;
    }
    return {best_p, best_c};
  }
  void write(size_t from, size_t end) {
    for (size_t i = from; i < end;) {
      auto [p, c] = run_at(i, end);
      if (c < 2 || p * (c - 1) < kMinHidden) {
        pending_ += html_escape(lines_[i++]) + "\n";
        continue;
      }
      flush();
      out_ += "<div class=\"fold\">\n"; // the first copy and the others, under one bar
      write(i, i + p);
      flush();
      std::string block = p == 1 ? "the line above" : "the " + std::to_string(p) + " lines above";
      out_ += "<details><summary>... repeated " + std::to_string(c - 1) + " more time" + (c > 2 ? "s" : "") +
              ": " + block + " again as lines " + std::to_string(i + p) + " to " +
              std::to_string(i + p * c - 1) + ", the same ops with other numbers</summary>\n";
      for (size_t k = 1; k < c; k++)
        write(i + k * p, i + (k + 1) * p);
      flush();
      out_ += "</details>\n</div>\n";
      i += p * c;
    }
  }
  void flush() {
    if (!pending_.empty()) out_ += "<pre>" + pending_ + "</pre>\n";
    pending_.clear();
  }

  const std::vector<std::string>& lines_;
  std::vector<int> shape_;
  std::string out_, pending_;
};

// A short one-line form of a node and what is below it, for the rewrite list.
std::string expr(const UOp* u, int depth) {
  std::string s = name(u->op);
  if (u->op == Ops::CONST || u->op == Ops::RANGE || u->op == Ops::SPECIAL || u->op == Ops::DEFINE_GLOBAL)
    s += " " + shorten(u->arg_string(), 16);
  if (u->src.empty() || u->op == Ops::VIEW) return s;
  if (depth == 0) return s + "(...)";
  s += "(";
  for (size_t i = 0; i < u->src.size(); i++)
    s += (i ? ", " : "") + expr(u->src[i].get(), depth - 1);
  return s + ")";
}

struct Stage {
  std::string group, title, notes; // notes: HTML
  Graph graph;                     // none for a stage that is text (the linear program, the source)
  std::string text;                // shown beside the graph, or instead of it when it is not laid out
  std::string listing;             // HTML shown in place of `text` (the linear program, folded)
  size_t lines = 0;                // the listing's length
};

// A rule's name without its table's location when the pass column already shows it.
std::string rule_in(const std::string& rule, const std::string& table) {
  return rule.rfind(table + " ", 0) == 0 ? rule.substr(table.size() + 1) : rule;
}

std::string steps_html(const RewriteTrace& tr) {
  if (tr.steps.empty()) return "";
  std::map<int, int> per_pass;
  for (auto& s : tr.steps)
    per_pass[s.pass]++;
  std::ostringstream os;
  os << "<details open><summary>" << tr.steps.size() << " rewrite steps on the way, in " << per_pass.size()
     << " passes</summary><table class=\"steps\"><tr><th>#</th><th>pass (table)</th>"
     << "<th>rule that fired</th><th>before</th><th>after</th></tr>\n";
  size_t shown = std::min<size_t>(tr.steps.size(), 400);
  for (size_t i = 0; i < shown; i++) {
    auto& s = tr.steps[i];
    os << "<tr><td>" << i + 1 << "</td><td>" << s.pass << ": " << html_escape(tr.passes[s.pass])
       << "</td><td>" << html_escape(rule_in(s.rule, tr.passes[s.pass])) << "</td><td>"
       << html_escape(shorten(expr(s.before.get(), 2), 120)) << "</td><td>"
       << html_escape(shorten(expr(s.after.get(), 2), 120)) << "</td></tr>\n";
  }
  os << "</table>";
  if (shown < tr.steps.size()) os << "<p>... and " << tr.steps.size() - shown << " more</p>";
  os << "</details>";
  return os.str();
}

// "ran in 1.234 ms: 80.1 GFLOPS, 2.3 GB/s, 63% of compute" for the k-th kernel, where it ran.
std::string run_text(const std::vector<KernelRun>& runs, size_t k) {
  if (k >= runs.size()) return "";
  const KernelRun& r = runs[k];
  double s = r.seconds;
  char buf[160];
  std::snprintf(buf, sizeof buf, "ran in %.3f ms: %.2f GFLOPS, %.2f GB/s", s * 1e3,
                s > 0 ? static_cast<double>(r.info->flops) / s * 1e-9 : 0.0,
                s > 0 ? static_cast<double>(r.info->bytes) / s * 1e-9 : 0.0);
  std::string t = buf;
  if (auto p = roofline_of(*r.info, s, settings().threads))
    t += ", " + share_text(*p) + " (the roofline's bound)";
  return t;
}

// `runs`: the kernels' times where they ran (VIZ=1), empty where they did not (:viz).
std::vector<Stage> stages_for(const std::vector<UOpRef>& outs, const std::vector<ScheduleItem>& items,
                              const std::vector<KernelRun>& runs, const std::string& group,
                              const std::string& schedule_notes) {
  std::vector<Stage> st;
  std::string outs_text;
  for (auto& o : outs)
    outs_text += print_tree(o);
  st.push_back({group, "tensor graph", "the lazy graph the tensors hold, before scheduling", graph_of(outs),
                outs_text, "", 0});
  std::string reasons = "<ol>";
  std::string sched_text;
  for (size_t k = 0; k < items.size(); k++) {
    const ScheduleItem& it = items[k];
    std::string ran = run_text(runs, k);
    reasons += "<li>why a kernel: " + html_escape(it.reason) + (ran.empty() ? "" : "; " + ran) + "</li>";
    sched_text += it.to_string();
  }
  reasons += "</ol>";
  st.push_back(
      {group, "schedule (" + std::to_string(items.size()) + " kernels)",
       "each box is a kernel; its label says why it is a kernel of its own" + reasons + schedule_notes,
       schedule_graph(items), sched_text, "", 0});
  for (size_t k = 0; k < items.size(); k++) {
    const ScheduleItem& item = items[k];
    // the kernel the realize runs, as the compiler built it (stages kept, not lowered again)
    const CompiledKernel& c = compiled_for(item);
    std::string kg = group + " / kernel " + std::to_string(k + 1) + " " + c.k.name;
    RewriteTrace tr;
    tr.passes = c.passes, tr.steps = c.steps;
    for (const mg::Stage& s : kernel_stages()) {
      std::string n = s.name, what = s.what, text = s.text(c);
      Graph graph; // none for the linear program and the source: they are text
      std::string listing;
      size_t lines = 0;
      if (n == "ast") {
        what += std::string("; why a kernel: ") + item.reason, graph = graph_of({item.ast});
        if (std::string ran = run_text(runs, k); !ran.empty()) what += "; " + ran;
      } else if (n == "opts") {
        what = text.substr(0, text.find('\n')), graph = graph_of({c.k.ast});
      } else if (n == "lowered") {
        graph = graph_of({c.k.lowered});
      } else if (n == "simplified") {
        graph = graph_of({c.k.simplified});
      } else if (n == "linear") { // a list, shown as one: a graph of it is too big for dot (#21)
        std::vector<std::string> ls = linear_lines(c.k.linear);
        listing = Folder(ls).html(), lines = ls.size();
      }
      st.push_back({kg, n, html_escape(what) + (n == "simplified" ? steps_html(tr) : ""), graph, text,
                    listing, lines});
    }
  }
  return st;
}

std::string stage_html(const Stage& s, size_t index, const DotClock& clock) {
  bool text_only = s.graph.dot.empty(); // a stage that is text (the linear program, the source)
  Layout lay;                           // the SVG, or why the graph is shown as text
  if (text_only)
    lay.why_not = "text";
  else if (s.graph.nodes > kVizMaxNodes || s.graph.edges > kVizMaxEdges)
    lay.why_not = std::to_string(s.graph.nodes) + " nodes and " + std::to_string(s.graph.edges) +
                  " edges: too many to lay out in seconds (the limits are " + std::to_string(kVizMaxNodes) +
                  " nodes, " + std::to_string(kVizMaxEdges) + " edges)";
  else if (clock.left() < 0.5)
    lay.why_not = "the page's time for layouts (" + std::to_string(static_cast<int>(kVizDotPageSeconds)) +
                  " s) is spent";
  else
    lay = run_dot(s.graph.dot, std::min(kVizDotSeconds, clock.left()));
  bool laid_out = !text_only && lay.why_not.empty();
  std::ostringstream os;
  os << "<section class=\"stage\" data-index=\"" << index << "\" data-group=\"" << html_escape(s.group)
     << "\" data-title=\"" << html_escape(s.title) << "\" data-nodes=\"" << (laid_out ? s.graph.nodes : 0)
     << "\">\n<h2>" << html_escape(s.group) << ": " << html_escape(s.title) << " <small>(";
  if (s.listing.empty())
    os << s.graph.nodes << " nodes";
  else
    os << s.lines << " lines";
  os << ")</small></h2>\n<div class=\"notes\">" << s.notes << "</div>\n";
  std::string text = s.listing.empty() ? "<pre>" + html_escape(s.text) + "</pre>"
                                       : "<div class=\"listing\">" + s.listing + "</div>";
  if (text_only) return os.str() + text + "\n</section>\n";
  if (laid_out)
    os << "<div class=\"graph\">" << lay.svg << "</div>\n";
  else
    os << "<p>Shown as text: " << html_escape(lay.why_not) << ".</p>\n";
  os << "<details" << (laid_out ? "" : " open") << "><summary>as text</summary>" << text
     << "</details>\n</section>\n";
  return os.str();
}

const char* kPageHead = R"(<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>moongrad VIZ: %TITLE%</title>
<script>window.mgErrors = []; window.addEventListener("error", function (e) { window.mgErrors.push(String(e.message)); });</script>
<style>
body { font-family: Helvetica, Arial, sans-serif; margin: 0; display: flex; height: 100vh; }
nav { width: 280px; overflow-y: auto; border-right: 1px solid #ccc; padding: 8px; font-size: 13px; flex: none; }
nav .group { font-weight: bold; margin-top: 8px; }
nav a { display: block; padding: 2px 8px; color: #222; text-decoration: none; cursor: pointer; }
nav a.current { background: #1e88e5; color: white; border-radius: 3px; }
main { flex: 1; overflow: auto; padding: 8px 16px; }
.bar button { font-size: 14px; margin-right: 6px; }
.stage { display: none; } .stage.current { display: block; }
.graph svg { max-width: 100%; height: auto; }
pre { background: #f6f6f6; padding: 6px; font-size: 12px; }
.listing pre { margin: 0; padding: 0 6px; }
.listing div.fold { border-left: 3px solid #90a4ae; margin: 2px 0 2px 2px; padding-left: 4px; }
.listing summary { font-size: 12px; color: #455a64; cursor: pointer; }
table.steps { border-collapse: collapse; font-size: 12px; } table.steps td, table.steps th { border: 1px solid #ddd; padding: 2px 6px; font-family: monospace; }
#selftest { color: #666; font-size: 11px; }
</style></head><body>
<nav id="nav"><div><b>moongrad VIZ</b><br>%TITLE%</div></nav>
<main><div class="bar"><button id="prev">&larr; previous stage</button><button id="next">next stage &rarr;</button>
<span id="where"></span> (arrow keys step too)</div>
)";

const char* kPageTail = R"(<pre id="selftest"></pre>
</main>
<script>
(function () {
  var stages = Array.prototype.slice.call(document.querySelectorAll("section.stage"));
  var nav = document.getElementById("nav"), links = [], cur = 0, group = null;
  stages.forEach(function (s, i) {
    if (s.dataset.group !== group) {
      group = s.dataset.group;
      var g = document.createElement("div"); g.className = "group"; g.textContent = group; nav.appendChild(g);
    }
    var a = document.createElement("a"); a.textContent = s.dataset.title;
    a.onclick = function () { show(i); }; nav.appendChild(a); links.push(a);
  });
  function show(i) {
    if (i < 0 || i >= stages.length) return;
    stages[cur].classList.remove("current"); links[cur].classList.remove("current");
    cur = i;
    stages[cur].classList.add("current"); links[cur].classList.add("current");
    document.getElementById("where").textContent = "stage " + (cur + 1) + " of " + stages.length;
  }
  document.getElementById("prev").onclick = function () { show(cur - 1); };
  document.getElementById("next").onclick = function () { show(cur + 1); };
  document.addEventListener("keydown", function (e) {
    if (e.key === "ArrowRight") show(cur + 1);
    if (e.key === "ArrowLeft") show(cur - 1);
  });
  // #stage=N opens stage N (from 1), for links and screenshots
  var want = Number((location.hash.match(/stage=(\d+)/) || [0, 1])[1]) - 1;
  if (stages.length) { stages[0].classList.add("current"); links[0].classList.add("current"); show(want); }
  // self-check: every laid-out graph has as many nodes as the engine counted
  var lines = [], bad = 0;
  stages.forEach(function (s, i) {
    var n = s.querySelectorAll("svg g.node").length, want = Number(s.dataset.nodes);
    if (n !== want) bad++;
    lines.push("stage " + i + " [" + s.dataset.group + ": " + s.dataset.title + "] " + n + " svg nodes, expected " + want +
      (n === want ? " ok" : " MISMATCH"));
  });
  window.mgErrors.forEach(function (m) { lines.push("script error: " + m); });
  lines.push("selftest: " + stages.length + " stages, " + bad + " mismatches, " + window.mgErrors.length + " script errors");
  document.getElementById("selftest").textContent = lines.join("\n");
})();
</script>
</body></html>
)";

std::string page(const std::string& title, const std::string& body) {
  std::string head = kPageHead;
  std::string t = html_escape(title);
  for (size_t at = 0; (at = head.find("%TITLE%", at)) != std::string::npos; at += t.size())
    head.replace(at, 7, t);
  return head + body + kPageTail;
}

// Written to a fresh file, then renamed over the page: a reader never sees half a page.
void write_file(const std::string& path, const std::string& text) {
  TempFile tmp(std::filesystem::path(path).filename().string() + ".", text);
  std::filesystem::rename(tmp.path, path);
}

std::string render_stages(const std::vector<Stage>& st, size_t& index) {
  std::string body;
  DotClock clock;
  for (auto& s : st)
    body += stage_html(s, index++, clock);
  return body;
}

} // namespace

std::string viz_page(const std::vector<UOpRef>& outs, const std::vector<ScheduleItem>& items,
                     const std::string& title) {
  size_t index = 0;
  return page(title, render_stages(stages_for(outs, items, {}, "graph", ""), index));
}

std::string viz_write(const std::vector<UOpRef>& outs, const std::string& title) {
  static int n = 0;
  std::vector<ScheduleItem> items;
  std::string notes;
  {
    RewriteTrace tr; // the scheduler's own rewrites (realized nodes to buffers, split reduces)
    items = preview_schedule(outs);
    notes = steps_html(tr);
  }
  size_t index = 0;
  std::string body = render_stages(stages_for(outs, items, {}, "graph", notes), index);
  std::string path = (std::filesystem::temp_directory_path() /
                      ("moongrad-viz-" + std::to_string(getpid()) + "-" + std::to_string(++n) + ".html"))
                         .string();
  write_file(path, page(title, body));
  return path;
}

void viz_record(const std::vector<UOpRef>& outs, const std::vector<ScheduleItem>& items,
                const std::vector<KernelRun>& runs) {
  static std::string body, path;
  static size_t index = 0;
  static int realizes = 0;
  static bool failed = false;
  if (failed || items.empty()) return;
  if (realizes == kVizMaxRealizes) {
    std::printf("VIZ: %d realizes recorded in %s; later ones are not\n", realizes, path.c_str());
    realizes++;
    return;
  }
  if (realizes > kVizMaxRealizes) return;
  try {
    body += render_stages(stages_for(outs, items, runs, "realize " + std::to_string(++realizes), ""), index);
    bool first = path.empty();
    if (first)
      path = (std::filesystem::temp_directory_path() / ("moongrad-viz-" + std::to_string(getpid()) + ".html"))
                 .string();
    write_file(path, page("every realize of process " + std::to_string(getpid()), body));
    if (first)
      std::printf("VIZ: the graphs of each realize are in %s (open it in a browser)\n", path.c_str());
  } catch (const std::exception& e) {
    failed = true;
    std::fprintf(stderr, "VIZ: %s; VIZ is off for the rest of this run\n", e.what());
  }
}

} // namespace mg
