#include "engine/codegen/search.h"

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>

#include "engine/settings.h"

namespace mg {

namespace {

// ---------------------------------------------------------------- the cache

struct DbClose {
  void operator()(sqlite3* db) const { sqlite3_close(db); }
};
using Db = std::unique_ptr<sqlite3, DbClose>;
struct StmtFinalize {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using Stmt = std::unique_ptr<sqlite3_stmt, StmtFinalize>;

// The cache, opened (and created) for one operation; nullptr when it cannot be used, which
// costs a search, never an error. WAL and a busy timeout let two processes share it.
Db open_cache() {
  make_dirs(cache_root());
  sqlite3* raw = nullptr;
  int rc =
      sqlite3_open_v2(beam_cache_path().c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  Db db(raw);
  if (rc != SQLITE_OK) return nullptr;
  sqlite3_busy_timeout(db.get(), 10000);
  const char* setup = "PRAGMA journal_mode=WAL;"
                      "CREATE TABLE IF NOT EXISTS beam (key TEXT PRIMARY KEY, opts TEXT NOT NULL, "
                      "seconds REAL, hand_seconds REAL)";
  if (sqlite3_exec(db.get(), setup, nullptr, nullptr, nullptr) != SQLITE_OK) {
    if (settings().debug >= 1)
      std::fprintf(stderr, "*** BEAM: cannot use the cache %s: %s\n", beam_cache_path().c_str(),
                   sqlite3_errmsg(db.get()));
    return nullptr;
  }
  return db;
}

Stmt prepare(sqlite3* db, const char* sql) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK) return nullptr;
  return Stmt(s);
}

std::optional<BeamResult> cache_get(const std::string& key) {
  Db db = open_cache();
  if (!db) return std::nullopt;
  Stmt s = prepare(db.get(), "SELECT opts, seconds, hand_seconds FROM beam WHERE key = ?");
  if (!s) return std::nullopt;
  sqlite3_bind_text(s.get(), 1, key.c_str(), -1, SQLITE_TRANSIENT);
  if (sqlite3_step(s.get()) != SQLITE_ROW) return std::nullopt;
  const unsigned char* text = sqlite3_column_text(s.get(), 0);
  auto opts = parse_opts_text(text ? reinterpret_cast<const char*>(text) : "");
  if (!opts) return std::nullopt; // a damaged row: search again, and overwrite it
  BeamResult r;
  r.opts = *opts;
  r.seconds = sqlite3_column_double(s.get(), 1);
  r.hand_seconds = sqlite3_column_double(s.get(), 2);
  r.cached = true;
  return r;
}

void cache_put(const std::string& key, const BeamResult& r) {
  Db db = open_cache();
  if (!db) return;
  Stmt s =
      prepare(db.get(), "INSERT OR REPLACE INTO beam (key, opts, seconds, hand_seconds) VALUES (?, ?, ?, ?)");
  if (!s) return;
  std::string text = opts_text(r.opts);
  sqlite3_bind_text(s.get(), 1, key.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(s.get(), 2, text.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_double(s.get(), 3, r.seconds);
  sqlite3_bind_double(s.get(), 4, r.hand_seconds);
  sqlite3_step(s.get());
}

// ---------------------------------------------------------------- the search

// Every opt BEAM may add: upcasts of the first dims over outputs, unrolls of the first reduce
// dims, by the amounts a CPU's registers and vectors like, swaps of the outer loops, local
// blocks of the first two dims over outputs (on a CPU, loops inside all others), padding of the
// first three to a vector's width, blocks of the first reduce dim (cache blocking), and the
// innermost loop vectorized (whichever of the first six dims that is). Not
// GROUP on a CPU: with one thread per output it only adds a loop. On a GPU: work-group sizes
// for the first three dims, and GROUP/GROUPTOP (threads sharing a reduce), not BLOCK.
std::vector<Opt> actions(bool gpu) {
  std::vector<Opt> a;
  for (int64_t axis = 0; axis < 6; axis++)
    for (int64_t amt : {2, 3, 4, 5, 8, 16})
      a.push_back({OptOp::UPCAST, axis, amt});
  for (int64_t axis = 0; axis < 4; axis++)
    for (int64_t amt : {2, 4, 8, 16})
      a.push_back({OptOp::UNROLL, axis, amt});
  for (int64_t axis = 0; axis < 3; axis++)
    for (int64_t other = axis + 1; other < 4; other++)
      a.push_back({OptOp::SWAP, axis, other});
  for (int64_t axis = 0; axis < (gpu ? 3 : 2); axis++)
    for (int64_t amt : {2, 4, 8, 16, 32})
      if (gpu || amt > 2) a.push_back({OptOp::LOCAL, axis, amt});
  if (gpu) {
    for (int64_t amt : {16, 32, 64, 128, 256})
      a.push_back({OptOp::GROUPTOP, 0, amt}), a.push_back({OptOp::GROUP, 0, amt});
    return a;
  }
  for (int64_t axis = 0; axis < 3; axis++)
    for (int64_t amt : {16, 32})
      a.push_back({OptOp::PADTO, axis, amt});
  for (int64_t amt : {32, 64, 128, 256})
    a.push_back({OptOp::BLOCK, 0, amt});
  for (int64_t axis = 0; axis < 6; axis++)
    a.push_back({OptOp::VECTORIZE, axis, 0});
  return a;
}

struct Candidate {
  std::vector<Opt> opts;
  double seconds;
};

} // namespace

std::string beam_cache_path() { return cache_root() + "/beam.sqlite"; }

int64_t beam_cache_entries() {
  Db db = open_cache();
  if (!db) return -1;
  Stmt s = prepare(db.get(), "SELECT count(*) FROM beam");
  if (!s || sqlite3_step(s.get()) != SQLITE_ROW) return -1;
  return sqlite3_column_int64(s.get(), 0);
}

std::string opts_text(const std::vector<Opt>& opts) {
  std::string s;
  for (auto& o : opts)
    s += (s.empty() ? "" : ";") + std::string(name(o.op)) + " " + std::to_string(o.axis) + " " +
         std::to_string(o.amount);
  return s;
}

std::optional<std::vector<Opt>> parse_opts_text(const std::string& s) {
  std::vector<Opt> opts;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ';')) {
    std::stringstream one(item);
    std::string op;
    int64_t axis, amount;
    if (!(one >> op >> axis >> amount)) return std::nullopt;
    try {
      opts.push_back({opt_op(op), axis, amount});
    } catch (const std::invalid_argument&) {
      return std::nullopt;
    }
  }
  return opts;
}

BeamResult beam_search(const std::string& key, const std::string& name, int width, double budget_s,
                       int threads, bool gpu, int debug, const std::vector<Opt>& hand,
                       const std::function<bool(const std::vector<Opt>&)>& legal,
                       const PrepareOpts& prepare) {
  if (auto hit = cache_get(key); hit && legal(hit->opts)) {
    if (debug >= 1)
      std::printf("*** BEAM %-24s from the cache: %s\n", name.c_str(),
                  hit->opts.empty() ? "(no opts)" : opts_text(hit->opts).c_str());
    return *hit;
  }
  using clk = std::chrono::steady_clock;
  auto t0 = clk::now();
  auto elapsed = [&] { return std::chrono::duration<double>(clk::now() - t0).count(); };
  BeamResult r;
  // Times a batch of lists: prepared here, compiled on the worker threads at once, then timed
  // one by one (best of 3) so that no compile runs beside a timing. A list that turns out
  // illegal is left out.
  auto time_all = [&](const std::vector<std::vector<Opt>>& lists) {
    std::vector<Candidate> out;
    std::vector<Trial> trials;
    std::vector<std::vector<Opt>> kept;
    for (auto& l : lists) {
      try {
        trials.push_back(prepare(l));
        kept.push_back(l);
      } catch (const IllegalOpt&) { // a list this kernel cannot take is skipped
      }
    }
    std::vector<std::exception_ptr> errors(trials.size());
    std::atomic<size_t> next{0};
    auto work = [&] {
      for (size_t i; (i = next++) < trials.size();) {
        try {
          trials[i].compile();
        } catch (...) {
          errors[i] = std::current_exception();
        }
      }
    };
    std::vector<std::thread> workers;
    try {
      for (int t = 1; t < std::min<int>(threads, static_cast<int>(trials.size())); t++)
        workers.emplace_back(work);
    } catch (const std::system_error&) { // no more threads to be had: fewer workers
    }
    work();
    for (auto& w : workers)
      w.join();
    for (size_t i = 0; i < trials.size(); i++) {
      if (errors[i]) std::rethrow_exception(errors[i]); // a compile failure is a bug: say so
      double s = trials[i].time();
      for (int k = 0; k < 2 && s < 0.05; k++) // slow candidates are not worth repeating
        s = std::min(s, trials[i].time());
      out.push_back({kept[i], s});
      r.tried++;
    }
    return out;
  };
  r.hand_seconds = time_all({hand}).at(0).seconds;
  r.tried = 1;
  Candidate best{hand, r.hand_seconds};
  // The search starts from the hand-coded list's prefixes (for a kernel with no hand-coded
  // opts, from no opts): a kernel with no opts at all can take seconds (a 1024 matmul), and
  // its one-opt neighbours are no better.
  std::set<std::string> seen{opts_text(hand)};
  std::vector<std::vector<Opt>> prefixes;
  for (size_t k = hand.empty() ? 0 : 1; k < hand.size(); k++) {
    prefixes.emplace_back(hand.begin(), hand.begin() + static_cast<long>(k));
    seen.insert(opts_text(prefixes.back()));
  }
  std::vector<Candidate> beam = time_all(prefixes);
  beam.push_back(best);
  std::sort(beam.begin(), beam.end(),
            [](const Candidate& a, const Candidate& b) { return a.seconds < b.seconds; });
  if (beam.size() > static_cast<size_t>(width)) beam.resize(width);
  if (beam[0].seconds < best.seconds) best = beam[0];
  // The result must beat the hand-coded list in a final duel: both timed again, in turns, three
  // times, best of each; within 3% the hand-coded list stays. On a shared machine a noisy moment
  // during the search made a list look 4% faster that was no faster (BEAM must never be slower).
  auto finish = [&] {
    if (opts_text(best.opts) == opts_text(hand)) return;
    double h = 1e30, b = 1e30;
    for (int k = 0; k < 3; k++) {
      auto duel = time_all({hand, best.opts});
      if (duel.size() < 2) return; // cannot happen: both lists were timed before
      h = std::min(h, duel[0].seconds), b = std::min(b, duel[1].seconds);
    }
    r.hand_seconds = h;
    best = b < h * 0.97 ? Candidate{best.opts, b} : Candidate{hand, h};
  };
  bool tty = ::isatty(::fileno(stdout));
  auto progress = [&](const char* end) {
    if (debug >= 1 && (tty || *end))
      std::printf("\r*** BEAM %-24s %4d tried, best %9.3f ms (hand-coded %9.3f ms), %5.1f s%s", name.c_str(),
                  r.tried, best.seconds * 1e3, r.hand_seconds * 1e3, elapsed(), end);
    std::fflush(stdout);
  };
  const auto all = actions(gpu);
  // the rounds leave time for the final duel: 3 rounds of both lists, each compiled and timed
  // up to 3 times
  double explore_s = budget_s - 20 * r.hand_seconds - 0.3, last_batch_s = 0;
  for (bool improved = true; improved && elapsed() < explore_s;) {
    std::vector<std::vector<Opt>> lists;
    for (auto& c : beam)
      for (auto& a : all) {
        if (elapsed() >= explore_s) break;
        std::vector<Opt> opts = c.opts;
        opts.push_back(a);
        if (seen.insert(opts_text(opts)).second && legal(opts)) lists.push_back(std::move(opts));
      }
    // in batches, so that the budget is checked between them: a batch starts only if one as
    // long as the last still fits (batches of large kernels' candidates take seconds to compile)
    std::vector<Candidate> next;
    const size_t batch = 4 * static_cast<size_t>(std::max(1, threads));
    for (size_t i = 0; i < lists.size() && elapsed() + last_batch_s < explore_s; i += batch) {
      double batch_t0 = elapsed();
      std::vector<std::vector<Opt>> part(lists.begin() + static_cast<long>(i),
                                         lists.begin() +
                                             static_cast<long>(std::min(lists.size(), i + batch)));
      for (auto& c : time_all(part))
        next.push_back(std::move(c));
      last_batch_s = elapsed() - batch_t0;
      progress("");
    }
    if (next.empty()) break;
    std::sort(next.begin(), next.end(),
              [](const Candidate& a, const Candidate& b) { return a.seconds < b.seconds; });
    if (next.size() > static_cast<size_t>(width)) next.resize(width);
    // progress is measured against the search's own last round; the hand-coded list only
    // sets the floor of the result
    improved = next[0].seconds < beam[0].seconds * 0.99;
    if (next[0].seconds < best.seconds) best = next[0];
    beam = std::move(next);
  }
  finish();
  r.opts = best.opts;
  r.seconds = best.seconds;
  progress("\n");
  if (debug >= 1)
    std::printf("*** BEAM %-24s chose %s: %.2fx the hand-coded opts\n", name.c_str(),
                r.opts.empty() ? "(no opts)" : opts_text(r.opts).c_str(),
                r.seconds > 0 ? r.hand_seconds / r.seconds : 1.0);
  cache_put(key, r);
  return r;
}

} // namespace mg
