#include "engine/codegen/search.h"

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <set>
#include <sstream>

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
// dims, by the amounts a CPU's registers and vectors like, and swaps of the outer loops.
std::vector<Opt> actions() {
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
                       const std::vector<Opt>& hand,
                       const std::function<bool(const std::vector<Opt>&)>& legal, const TimeOpts& time) {
  if (auto hit = cache_get(key); hit && legal(hit->opts)) {
    if (settings().debug >= 1)
      std::printf("*** BEAM %-24s from the cache: %s\n", name.c_str(),
                  hit->opts.empty() ? "(no opts)" : opts_text(hit->opts).c_str());
    return *hit;
  }
  using clk = std::chrono::steady_clock;
  auto t0 = clk::now();
  auto elapsed = [&] { return std::chrono::duration<double>(clk::now() - t0).count(); };
  BeamResult r;
  r.hand_seconds = time(hand);
  Candidate best{hand, r.hand_seconds};
  // The search starts from the hand-coded list's prefixes (for a kernel with no hand-coded
  // opts, from no opts): a kernel with no opts at all can take seconds (a 1024 matmul), and
  // its one-opt neighbours are no better.
  std::vector<Candidate> beam;
  std::set<std::string> seen{opts_text(hand)};
  for (size_t k = hand.empty() ? 0 : 1; k < hand.size(); k++) {
    std::vector<Opt> prefix(hand.begin(), hand.begin() + static_cast<long>(k));
    seen.insert(opts_text(prefix));
    beam.push_back({prefix, time(prefix)});
    r.tried++;
  }
  beam.push_back(best);
  r.tried++;
  std::sort(beam.begin(), beam.end(),
            [](const Candidate& a, const Candidate& b) { return a.seconds < b.seconds; });
  if (beam.size() > static_cast<size_t>(width)) beam.resize(width);
  if (beam[0].seconds < best.seconds) best = beam[0];
  // a rounding slip must not beat the hand-coded list: a result within 1% of it keeps it
  auto finish = [&] {
    if (best.seconds > r.hand_seconds * 0.99) best = {hand, r.hand_seconds};
  };
  bool tty = ::isatty(::fileno(stdout));
  auto progress = [&](const char* end) {
    if (settings().debug >= 1 && (tty || *end))
      std::printf("\r*** BEAM %-24s %4d tried, best %9.3f ms (hand-coded %9.3f ms), %5.1f s%s", name.c_str(),
                  r.tried, best.seconds * 1e3, r.hand_seconds * 1e3, elapsed(), end);
    std::fflush(stdout);
  };
  const auto all = actions();
  for (bool improved = true; improved && elapsed() < budget_s;) {
    std::vector<Candidate> next;
    for (auto& c : beam) {
      for (auto& a : all) {
        if (elapsed() >= budget_s) break;
        std::vector<Opt> opts = c.opts;
        opts.push_back(a);
        if (!seen.insert(opts_text(opts)).second || !legal(opts)) continue;
        double s;
        try {
          s = time(opts);
        } catch (const std::invalid_argument&) {
          continue;
        }
        r.tried++;
        next.push_back({opts, s});
        progress("");
      }
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
  if (settings().debug >= 1)
    std::printf("*** BEAM %-24s chose %s: %.2fx the hand-coded opts\n", name.c_str(),
                r.opts.empty() ? "(no opts)" : opts_text(r.opts).c_str(),
                r.seconds > 0 ? r.hand_seconds / r.seconds : 1.0);
  cache_put(key, r);
  return r;
}

} // namespace mg
