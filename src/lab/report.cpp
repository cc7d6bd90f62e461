// Tables and JSON for the lab commands.
#include "lab/report.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/sha256.h"
#include "lab/table.h"
#include "tokenizer/tokenizer.h"

namespace lockstep::lab {
namespace {

using nlohmann::json;

std::string Lp(double v) {
  return std::isfinite(v) ? fmt::format("{:.3f}", v) : "-inf";
}

json TokenJson(int32_t id, double logprob, const tokenizer::Tokenizer* tok) {
  json j = {{"id", id}, {"logprob", logprob}};
  if (tok && id < tok->n_tokens()) j["piece"] = tok->TokenToPiece(id, true);
  return j;
}

json PositionJson(const PositionStats& s, const tokenizer::Tokenizer* tok) {
  json top = json::array();
  for (const auto& t : s.top) top.push_back(TokenJson(t.id, t.logprob, tok));
  json j = {{"index", s.index},       {"pos", s.pos},   {"token", s.token},
            {"logprob", s.logprob},   {"rank", s.rank}, {"margin", s.margin},
            {"near_tie", s.near_tie}, {"top", top}};
  if (tok && s.token < tok->n_tokens()) j["piece"] = tok->TokenToPiece(s.token, true);
  return j;
}

std::string TopText(const PositionStats& s, const tokenizer::Tokenizer* tok) {
  std::string out;
  for (const auto& t : s.top) {
    if (!out.empty()) out += " ";
    out += fmt::format("{} {:.2f}", ShowToken(tok, t.id), t.logprob);
  }
  return out;
}

std::vector<int32_t> Slice(const std::vector<int32_t>& v, int64_t b, int64_t e) {
  b = std::clamp<int64_t>(b, 0, static_cast<int64_t>(v.size()));
  e = std::clamp<int64_t>(e, b, static_cast<int64_t>(v.size()));
  return {v.begin() + b, v.begin() + e};
}

}  // namespace

json ForkJson(const ForkAnalysis& f, const tokenizer::Tokenizer* tok) {
  return {{"kind", ForkKindName(f.kind)},
          {"a", PositionJson(f.a, tok)},
          {"b", PositionJson(f.b, tok)},
          {"gap", f.gap},
          {"margin", f.a.margin}};
}

json LogprobsJson(const std::vector<PositionStats>& rows, const tokenizer::Tokenizer* tok) {
  json pos = json::array();
  int64_t greedy = 0, ties = 0;
  double sum = 0;
  for (const auto& s : rows) {
    pos.push_back(PositionJson(s, tok));
    greedy += s.rank == 1;
    ties += s.near_tie;
    sum += s.logprob;
  }
  const double n = std::max<double>(1, static_cast<double>(rows.size()));
  return {{"positions", pos},
          {"summary",
           {{"scored", rows.size()},
            {"greedy_match", greedy},
            {"near_ties", ties},
            {"mean_logprob", sum / n}}}};
}

std::string LogprobsText(const std::vector<PositionStats>& rows, const tokenizer::Tokenizer* tok,
                         bool only_ties) {
  Table t({">i", ">pos", "token", ">logprob", ">rank", ">margin", "", "top"});
  int64_t greedy = 0, ties = 0;
  double sum = 0;
  for (const auto& s : rows) {
    greedy += s.rank == 1;
    ties += s.near_tie;
    sum += s.logprob;
    if (only_ties && !s.near_tie) continue;
    t.Row({std::to_string(s.index), std::to_string(s.pos), ShowToken(tok, s.token), Lp(s.logprob),
           std::to_string(s.rank), fmt::format("{:.3f}", s.margin), s.near_tie ? "TIE" : "",
           TopText(s, tok)});
  }
  const double n = std::max<double>(1, static_cast<double>(rows.size()));
  return t.Render() + fmt::format(
                          "{} positions scored; greedy choice {} ({:.1f}%); near-ties {}; mean "
                          "logprob {:.3f}\n",
                          rows.size(), greedy, 100.0 * greedy / n, ties, sum / n);
}

json DivergeJson(const DivergeInput& in, const tokenizer::Tokenizer* tok) {
  json j = {{"a", {{"source", in.name_a}, {"length", in.d.len_a}}},
            {"b", {{"source", in.name_b}, {"length", in.d.len_b}}},
            {"identical", in.d.identical}};
  if (in.d.identical) return j;
  j["index"] = in.d.index;
  j["common_prefix"] = in.d.index;
  if (in.d.has_a()) j["a"]["token"] = in.a[static_cast<size_t>(in.d.index)];
  if (in.d.has_b()) j["b"]["token"] = in.b[static_cast<size_t>(in.d.index)];
  if (tok) {
    j["before"] = tok->Decode(Slice(in.a, in.d.index - in.around, in.d.index), true);
    j["a"]["after"] = tok->Decode(Slice(in.a, in.d.index, in.d.index + in.around), true);
    j["b"]["after"] = tok->Decode(Slice(in.b, in.d.index, in.d.index + in.around), true);
  }
  if (in.fork)
    j["fork"] = ForkJson(*in.fork, tok);
  else if (!in.fork_note.empty())
    j["fork_note"] = in.fork_note;
  return j;
}

std::string DivergeText(const DivergeInput& in, const tokenizer::Tokenizer* tok) {
  std::string out = fmt::format("A: {} ({} tokens)\nB: {} ({} tokens)\n", in.name_a, in.d.len_a,
                                in.name_b, in.d.len_b);
  if (in.d.identical) return out + "identical: no divergence\n";
  out += fmt::format("first difference at index {} (common prefix {} tokens)\n", in.d.index,
                     in.d.index);
  const int64_t i = in.d.index;
  out += fmt::format("  before : {}\n", ShowText(tok, Slice(in.a, i - in.around, i)));
  out += fmt::format("  A      : {}\n", in.d.has_a() ? ShowText(tok, Slice(in.a, i, i + in.around))
                                                     : "<end of stream>");
  out += fmt::format("  B      : {}\n", in.d.has_b() ? ShowText(tok, Slice(in.b, i, i + in.around))
                                                     : "<end of stream>");
  if (!in.fork) {
    if (!in.fork_note.empty()) out += "fork: " + in.fork_note + "\n";
    return out;
  }
  const ForkAnalysis& f = *in.fork;
  Table t({"", "token", ">logprob", ">rank"});
  t.Row({"A", ShowToken(tok, f.a.token), Lp(f.a.logprob), std::to_string(f.a.rank)});
  t.Row({"B", ShowToken(tok, f.b.token), Lp(f.b.logprob), std::to_string(f.b.rank)});
  out += "fork at position " + std::to_string(f.a.pos) + ":\n" + t.Render();
  out += fmt::format("model top: {}\n", TopText(f.a, tok));
  out += fmt::format("top-1/top-2 margin {:.4f}, A/B gap {:.4f} -> {}\n", f.a.margin, f.gap,
                     ForkKindName(f.kind));
  return out;
}

json AcceptJson(const std::vector<AcceptCell>& cells) {
  json arr = json::array();
  for (const auto& c : cells) {
    const auto& st = c.result.stats;
    json per = json::array(), segs = json::array();
    for (size_t k = 0; k < st.drafted_at.size(); ++k)
      per.push_back(
          {{"position", k + 1},
           {"drafted", st.drafted_at[k]},
           {"accepted", st.accepted_at[k]},
           {"rate", st.drafted_at[k] ? double(st.accepted_at[k]) / st.drafted_at[k] : 0.0}});
    for (const auto& s : c.result.segments)
      segs.push_back({{"begin", s.begin},
                      {"end", s.end},
                      {"rounds", s.rounds},
                      {"drafted", s.drafted},
                      {"accepted", s.accepted},
                      {"rate", s.rate()}});
    json j = {{"stream", c.stream},
              {"draft", c.draft},
              {"rate", st.rate()},
              {"drafted", st.drafted},
              {"accepted", st.accepted},
              {"rounds", st.rounds},
              {"mean_accepted", c.result.mean_accepted()},
              {"per_position", per},
              {"segments", segs}};
    if (c.result.scored)
      j["target_greedy_match"] = double(c.result.greedy_match) / c.result.scored;
    arr.push_back(j);
  }
  return {{"results", arr}};
}

std::string AcceptText(const std::vector<AcceptCell>& cells, bool matrix) {
  if (matrix) {
    std::vector<std::string> drafts, streams;
    for (const auto& c : cells) {
      if (std::find(drafts.begin(), drafts.end(), c.draft) == drafts.end())
        drafts.push_back(c.draft);
      if (std::find(streams.begin(), streams.end(), c.stream) == streams.end())
        streams.push_back(c.stream);
    }
    std::vector<std::string> head = {"stream \\ drafter"};
    for (const auto& d : drafts) head.push_back(">" + d);
    Table t(head);
    for (const auto& s : streams) {
      std::vector<std::string> row = {s};
      for (const auto& d : drafts)
        for (const auto& c : cells)
          if (c.stream == s && c.draft == d)
            row.push_back(fmt::format("{:.4f} (len {:.2f})", c.result.stats.rate(),
                                      c.result.mean_accepted()));
      t.Row(row);
    }
    return t.Render() + "cells: acceptance rate (mean accepted drafts per drafting round)\n";
  }
  std::string out;
  for (const auto& c : cells) {
    const auto& st = c.result.stats;
    out += fmt::format("stream {} x drafter {}\n", c.stream, c.draft);
    out += fmt::format("acceptance {:.4f} ({} / {} drafts), {} rounds, mean accepted length {:.3f}",
                       st.rate(), st.accepted, st.drafted, st.rounds, c.result.mean_accepted());
    if (c.result.scored)
      out += fmt::format(", target greedy on {:.1f}% of the stream",
                         100.0 * c.result.greedy_match / c.result.scored);
    out += "\n\n";
    Table per({">draft position", ">drafted", ">accepted", ">rate"});
    for (size_t k = 0; k < st.drafted_at.size(); ++k)
      per.Row({std::to_string(k + 1), std::to_string(st.drafted_at[k]),
               std::to_string(st.accepted_at[k]),
               fmt::format("{:.4f}",
                           st.drafted_at[k] ? double(st.accepted_at[k]) / st.drafted_at[k] : 0.0)});
    out += per.Render() + "\n";
    Table seg({"segment", ">rounds", ">drafted", ">accepted", ">rate"});
    for (const auto& s : c.result.segments)
      seg.Row({fmt::format("{}-{}", s.begin, s.end - 1), std::to_string(s.rounds),
               std::to_string(s.drafted), std::to_string(s.accepted),
               fmt::format("{:.4f}", s.rate())});
    out += seg.Render() + "\n";
  }
  return out;
}

json ProbeJson(const std::vector<ProbeMode>& modes, const tokenizer::Tokenizer* tok) {
  json arr = json::array();
  for (const auto& m : modes) {
    json runs = json::array();
    for (const auto& r : m.runs) {
      json jr = {{"label", r.label},
                 {"n_tokens", r.tokens.size()},
                 {"output_sha256", IdsSha256(r.tokens)}};
      if (!r.error.empty()) jr["error"] = r.error;
      runs.push_back(jr);
    }
    json j = {{"mode", m.name}, {"runs", runs}, {"unique_outputs", m.unique}};
    if (m.differing_run >= 0) {
      j["first_divergence"] = {{"run", m.runs[static_cast<size_t>(m.differing_run)].label},
                               {"index", m.divergence.index}};
      if (m.fork)
        j["first_divergence"]["fork"] = ForkJson(*m.fork, tok);
      else
        j["first_divergence"]["fork_note"] = m.fork_error;
    }
    arr.push_back(j);
  }
  return {{"modes", arr}};
}

std::string ProbeText(const std::vector<ProbeMode>& modes, const tokenizer::Tokenizer* tok) {
  Table t({"mode", ">runs", ">errors", ">unique outputs", "first divergence"});
  std::string notes;
  for (const auto& m : modes) {
    int errors = 0;
    for (const auto& r : m.runs) {
      errors += !r.error.empty();
      if (!r.error.empty() && notes.find(r.error) == std::string::npos)
        notes += fmt::format("{} / {}: {}\n", m.name, r.label, r.error);
    }
    std::string div = "-";
    if (m.differing_run >= 0) {
      div = fmt::format("{} @ {}", m.runs[static_cast<size_t>(m.differing_run)].label,
                        m.divergence.index);
      if (m.fork)
        div += fmt::format(": {} vs {}, margin {:.3f}, {}", ShowToken(tok, m.fork->a.token),
                           ShowToken(tok, m.fork->b.token), m.fork->a.margin,
                           ForkKindName(m.fork->kind));
    }
    t.Row({m.name, std::to_string(m.runs.size()), std::to_string(errors), std::to_string(m.unique),
           div});
  }
  std::string out = t.Render();
  for (const auto& m : modes) {
    out += fmt::format("\n{}:\n", m.name);
    Table r({"run", ">tokens", "output sha256"});
    for (const auto& run : m.runs)
      r.Row({run.label, std::to_string(run.tokens.size()),
             run.error.empty() ? IdsSha256(run.tokens).substr(0, 16) : "error"});
    out += r.Render();
  }
  return notes.empty() ? out : out + "\n" + notes;
}

json IdentityDiffJson(const std::vector<FieldDiff>& diffs) {
  json arr = json::array();
  for (const auto& d : diffs) arr.push_back({{"field", d.field}, {"a", d.a}, {"b", d.b}});
  return {{"identical", diffs.empty()}, {"differences", arr}};
}

std::string IdentityDiffText(const std::vector<FieldDiff>& diffs, const std::string& a,
                             const std::string& b) {
  if (diffs.empty()) return "identities are identical\n";
  Table t({"field", "A: " + a, "B: " + b});
  for (const auto& d : diffs) t.Row({d.field, d.a, d.b});
  return t.Render() + fmt::format("{} field(s) differ\n", diffs.size());
}

}  // namespace lockstep::lab
