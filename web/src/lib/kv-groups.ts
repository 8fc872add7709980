// Grouped-query attention (Ainslie et al. 2023): several query heads read the same key/value
// head. The server sends kv_head_of[h] (docs/api.md); this turns it into the groups the explorer
// draws, one frame per KV head with the query heads that share it.

export interface KvGroup {
  /** The key/value head index. */
  kv: number;
  /** Query heads reading it, in increasing order. */
  heads: number[];
  /** "KV head g: heads a–b" (or a list when the heads are not consecutive). */
  label: string;
}

/** Query heads grouped by KV head, or null when every query head has its own K and V (plain
 *  multi-head attention: nothing to group). Throws on a map that does not fit the head counts. */
export function kvGroups(model: { n_head: number; n_kv_head: number; kv_head_of: number[] }): KvGroup[] | null {
  const { n_head, n_kv_head, kv_head_of } = model;
  if (kv_head_of.length !== n_head)
    throw new Error(`kv_head_of has ${kv_head_of.length} entries for ${n_head} query heads`);
  if (n_kv_head >= n_head) return null;
  const groups: KvGroup[] = Array.from({ length: n_kv_head }, (_, kv) => ({ kv, heads: [], label: '' }));
  kv_head_of.forEach((kv, head) => {
    if (!Number.isInteger(kv) || kv < 0 || kv >= n_kv_head)
      throw new Error(`query head ${head} maps to KV head ${kv}, outside 0–${n_kv_head - 1}`);
    groups[kv].heads.push(head);
  });
  for (const g of groups) g.label = `KV head ${g.kv + 1}: ${headRange(g.heads)}`;
  return groups;
}

/** Head numbers as people count them (index + 1, lib/numbering.ts): "heads 4–6", "head 5", or
 *  "heads 1, 3, 5" when not consecutive. */
export function headRange(heads: number[]): string {
  if (heads.length === 0) return 'no heads';
  if (heads.length === 1) return `head ${heads[0] + 1}`;
  const consecutive = heads.every((hd, i) => i === 0 || hd === heads[i - 1] + 1);
  return consecutive
    ? `heads ${heads[0] + 1}–${heads[heads.length - 1] + 1}`
    : `heads ${heads.map((hd) => hd + 1).join(', ')}`;
}

/** Distinct colours for KV groups (cycled beyond their number). */
const GROUP_COLOURS = ['#1f6feb', '#7c3aed', '#15803d', '#0e7490', '#be185d', '#a16207', '#4b5563', '#b91c1c'];

export function groupColour(kv: number): string {
  return GROUP_COLOURS[kv % GROUP_COLOURS.length];
}

/** What the model's attention is called by how many key/value heads its query heads read: one
 *  each (multi-head), one for all (multi-query, Shazeer 2019), or fewer than the query heads
 *  (grouped-query, Ainslie et al. 2023). */
export function attentionKind(model: { n_head: number; n_kv_head: number }): string {
  if (model.n_kv_head >= model.n_head) return 'multi-head attention';
  return model.n_kv_head === 1 ? 'multi-query attention' : 'grouped-query attention';
}

/** The short name in the table of head counts: "8 (GQA)", "1 (MQA)", "12 (one per head)". */
export function kvCountText(kv: number, heads: number): string {
  if (kv >= heads) return `${kv} (one per head)`;
  return kv === 1 ? `${kv} (MQA)` : `${kv} (GQA)`;
}
