// The catalogue of statistics as GET /api/model serves it (statistics_catalogue), for the web's
// unit tests. tests/python/test_catalogue.py fails when it is not what the core serves; write it
// again from `headscope._core.statistics_catalogue()` when the catalogue changes.

import type { StatInfo } from './api';

export const STATISTICS_CATALOGUE: StatInfo[] = [
  {
    "constants": {},
    "help": "The queries the means are taken over: every query with at least one key it may attend to.",
    "key": "n_queries",
    "kind": "count",
    "label": "Queries",
    "unit": "queries"
  },
  {
    "constants": {},
    "help": "How spread out a query’s attention is, in bits (−Σ a·log₂ a over its row), averaged over the rows. 0 bits: all of it on one key. High entropy = spread out over many keys; the most is log₂ n, when all n keys get the same weight.",
    "key": "entropy_bits",
    "kind": "mean",
    "label": "Entropy",
    "unit": "bits"
  },
  {
    "constants": {},
    "help": "The entropy divided by its largest possible value, log₂ n: 0 for one key, 1 for a uniform row (queries that see one key only are left out).",
    "key": "entropy_norm",
    "kind": "mean",
    "label": "Normalised entropy",
    "unit": "ratio"
  },
  {
    "constants": {
      "sparsity_fraction": 0.1
    },
    "help": "The share of weights below the sparsity threshold: 10 % of what a key would get if the row were uniform (a weight under 0.1 / n, for n keys the query may see). High sparsity = the head ignores most keys.",
    "key": "sparsity",
    "kind": "mean",
    "label": "Sparsity",
    "unit": "share"
  },
  {
    "constants": {
      "cover_mass": 0.9
    },
    "help": "The fewest keys whose largest weights add up to 90 % of the row, averaged over the rows.",
    "key": "keys_90",
    "kind": "mean",
    "label": "Keys for 90 %",
    "unit": "keys"
  },
  {
    "constants": {
      "cover_mass": 0.9
    },
    "help": "The keys covering 90 % of the row as a share of the n keys the query may see.",
    "key": "keys_90_share",
    "kind": "mean",
    "label": "Share of keys for 90 %",
    "unit": "share"
  },
  {
    "constants": {},
    "help": "The largest weight in each query’s row, averaged over the rows. Near 1: every query picks one key; near 1 / n: no key stands out.",
    "key": "max_attention",
    "kind": "mean",
    "label": "Max attention",
    "unit": "weight"
  },
  {
    "constants": {},
    "help": "Average attention measures how much weight a key typically has where the attention goes: Σ a² over a row (each weight weighted by itself), averaged over the rows. 1 / n for a uniform row, 1 when all of it is on one key; unlike a plain mean of the weights (always 1 / n), it tells focused heads from diffuse ones.",
    "key": "avg_attention",
    "kind": "mean",
    "label": "Avg attention",
    "unit": "weight"
  },
  {
    "constants": {},
    "help": "Σ min(a, 1 / n): the share of the row that a uniform row would also put there; 1 for a uniform row, 1 / n for one key.",
    "key": "uniform_overlap",
    "kind": "mean",
    "label": "Overlap with a uniform row",
    "unit": "share"
  },
  {
    "constants": {},
    "help": "Σ a·|k − q|: how far from the query, in positions, its attention lands on average.",
    "key": "mean_distance",
    "kind": "mean",
    "label": "Mean distance (positions)",
    "unit": "positions"
  },
  {
    "constants": {},
    "help": "Σ a·(k − q): where the attention lands relative to the query; negative looks back.",
    "key": "mean_offset",
    "kind": "mean",
    "label": "Mean signed offset (− = looks back)",
    "unit": "positions"
  },
  {
    "constants": {},
    "help": "The weight a query puts on its own position.",
    "key": "self_mass",
    "kind": "mean",
    "label": "On itself",
    "unit": "share"
  },
  {
    "constants": {},
    "help": "The weight on the position just before the query, over the queries that may see it.",
    "key": "prev_mass",
    "kind": "mean",
    "label": "On the previous token",
    "unit": "share"
  },
  {
    "constants": {},
    "help": "The weight on the position just after the query, over the queries that may see it (none in a causal model).",
    "key": "next_mass",
    "kind": "mean",
    "label": "On the next token",
    "unit": "share"
  },
  {
    "constants": {
      "local_window": 3
    },
    "help": "The weight on the neighbours at most 3 positions away, the query itself left out.",
    "key": "local_mass",
    "kind": "mean",
    "label": "Within ±3 positions (not itself)",
    "unit": "share"
  },
  {
    "constants": {
      "max_offset": 8
    },
    "help": "For each signed offset d = k − q from −8 to +8, the weight on position q + d, over the queries that may see it.",
    "key": "offset_mass",
    "kind": "offsets",
    "label": "Weight by offset",
    "unit": "share"
  },
  {
    "constants": {},
    "help": "The queries whose window holds the first position (all of them without a sliding window): the first and sink shares are means over these.",
    "key": "n_sink_queries",
    "kind": "count",
    "label": "Queries that see the first position",
    "unit": "queries"
  },
  {
    "constants": {},
    "help": "The weight on position 0: [CLS], BOS, or the first word when the template adds none.",
    "key": "first_mass",
    "kind": "mean",
    "label": "On the first position",
    "unit": "share"
  },
  {
    "constants": {},
    "help": "The weight on the tokens the template adds ([CLS], [SEP], BOS, EOS).",
    "key": "special_mass",
    "kind": "mean",
    "label": "On special tokens",
    "unit": "share"
  },
  {
    "constants": {},
    "help": "The weight on special tokens after position 0 ([SEP], EOS).",
    "key": "end_special_mass",
    "kind": "mean",
    "label": "On the closing special token",
    "unit": "share"
  },
  {
    "constants": {},
    "help": "The weight on the first position and every special token, where heads park attention they do not use.",
    "key": "sink_mass",
    "kind": "mean",
    "label": "On first or special tokens (sink)",
    "unit": "share"
  },
  {
    "constants": {},
    "help": "The sink share with each weight times the norm of what the head moves from that key; token level of a model run only.",
    "key": "sink_mass_norm",
    "kind": "mean",
    "label": "Sink share of what is moved (‖α·vW_O‖)",
    "unit": "share"
  },
  {
    "constants": {},
    "help": "The weight on punctuation tokens.",
    "key": "punct_mass",
    "kind": "mean",
    "label": "On punctuation",
    "unit": "share"
  },
  {
    "constants": {},
    "help": "The weight on ordinary text tokens other than the query itself.",
    "key": "content_mass",
    "kind": "mean",
    "label": "On other content tokens",
    "unit": "share"
  },
  {
    "constants": {},
    "help": "The weight on other positions holding the same token, over the queries whose token occurs again.",
    "key": "duplicate_mass",
    "kind": "mean",
    "label": "On other copies of the same token",
    "unit": "share"
  },
  {
    "constants": {},
    "help": "The queries whose token occurs at another position they may see: duplicate_mass is a mean over these.",
    "key": "n_duplicate_queries",
    "kind": "count",
    "label": "Queries with a repeated token",
    "unit": "queries"
  }
];
