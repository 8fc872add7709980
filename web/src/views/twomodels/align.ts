// What "Compare models" computes without a server: where a layer sits by relative depth, how many
// heads of a run have each primary role, and which token of one tokenizer covers the characters of
// a token of another. Pure functions, tested in align.test.ts.

/** The relative depth of layer `layer` of a model with `nLayer` layers: the middle of its row when
 *  the whole stack spans 0 (input) to 1 (output), (l + 0.5) / L. Layer 3 of 6 and layer 15 of 30
 *  both sit at 0.5 − ε … the same height. */
export function layerDepth(layer: number, nLayer: number): number {
  return (layer + 0.5) / nLayer;
}

/** The rows of a grid `height` pixels tall holding `nLayer` layers: the top and height of each.
 *  Two grids of the same height line their layers up by relative depth. */
export function depthRows(nLayer: number, height: number): { top: number; height: number }[] {
  const row = height / nLayer;
  return Array.from({ length: nLayer }, (_, l) => ({ top: l * row, height: row }));
}

/** The layer of a model with `nLayer` layers at relative depth `depth` (0 … 1). */
export function layerAtDepth(depth: number, nLayer: number): number {
  return Math.max(0, Math.min(nLayer - 1, Math.floor(depth * nLayer)));
}

/** One role of a census: its id, how many heads have it as their primary role, and their share. */
export interface CensusEntry {
  id: string;
  count: number;
  share: number;
}

/** How many heads have each primary role, in the order of `catalogue` (the server's role ids),
 *  then any role the catalogue does not list; roles no head has are kept with count 0. */
export function roleCensus(
  heads: readonly { roles: { primary: { id: string } } }[],
  catalogue: readonly string[],
): CensusEntry[] {
  const counts = new Map<string, number>(catalogue.map((id) => [id, 0]));
  for (const h of heads) counts.set(h.roles.primary.id, (counts.get(h.roles.primary.id) ?? 0) + 1);
  const n = heads.length;
  return [...counts].map(([id, count]) => ({ id, count, share: n > 0 ? count / n : 0 }));
}

/** The role ids of two censuses in one order: the first model's catalogue, then the second's new
 *  ones; a role no head of either model has is left out. */
export function censusRows(a: readonly CensusEntry[], b: readonly CensusEntry[]): string[] {
  const ids: string[] = [];
  for (const e of [...a, ...b]) if (!ids.includes(e.id)) ids.push(e.id);
  const count = (list: readonly CensusEntry[], id: string) => list.find((e) => e.id === id)?.count ?? 0;
  return ids.filter((id) => count(a, id) + count(b, id) > 0);
}

/** A token's span in the text, in the units the server counts (begin … end, end excluded). */
export interface Span {
  begin: number;
  end: number;
  special: boolean;
}

/** The token of `tokens` that stands for `span` of another tokenizer's token: the one whose span
 *  overlaps it most (the first of equals); for a span with no characters (a special token such as
 *  [CLS] or <bos>) a special token at the same place, else the token starting there (or the last
 *  one ending there). -1 when no token reaches the span (a text the other model read only in part). */
export function tokenCovering(tokens: readonly Span[], span: { begin: number; end: number }): number {
  if (span.end > span.begin) {
    let best = -1,
      bestOverlap = 0;
    tokens.forEach((t, i) => {
      const overlap = Math.min(t.end, span.end) - Math.max(t.begin, span.begin);
      if (overlap > bestOverlap) [best, bestOverlap] = [i, overlap];
    });
    return best;
  }
  const at = span.begin;
  const special = tokens.findIndex((t) => t.special && t.begin === at && t.end === at);
  if (special >= 0) return special;
  const starting = tokens.findIndex((t) => t.begin >= at && t.end > t.begin);
  if (starting >= 0 && tokens[starting].begin <= at) return starting;
  for (let i = tokens.length - 1; i >= 0; i--) if (tokens[i].end <= at && tokens[i].end > tokens[i].begin) return i;
  return starting;
}
