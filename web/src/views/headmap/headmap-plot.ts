// The head map's arithmetic, free of the DOM: the scale from map units to the picture (one scale
// for both axes, so that distances on screen keep their proportions), the point under the pointer,
// point sizes by importance, and the JSON and CSV downloads.

import type { HeadMapResult } from '../../lib/api';
import { csvField, EXPORT_NUMBERING } from '../../lib/export';

export interface MapScale {
  /** Map units to picture pixels (x to the right, y upwards on the map, downwards on screen). */
  px(x: number): number;
  py(y: number): number;
  /** Pixels per map unit, the same on both axes. */
  k: number;
}

/** The largest scale that fits every point inside width × height less `pad` on each side, with
 *  the points' bounding box centred; one scale for both axes. */
export function mapScale(
  points: readonly { x: number; y: number }[],
  width: number,
  height: number,
  pad: number,
): MapScale {
  let x0 = Infinity,
    x1 = -Infinity,
    y0 = Infinity,
    y1 = -Infinity;
  for (const p of points) {
    x0 = Math.min(x0, p.x);
    x1 = Math.max(x1, p.x);
    y0 = Math.min(y0, p.y);
    y1 = Math.max(y1, p.y);
  }
  if (!Number.isFinite(x0)) x0 = x1 = y0 = y1 = 0;
  const w = Math.max(1, width - 2 * pad),
    hgt = Math.max(1, height - 2 * pad);
  const spanX = x1 - x0,
    spanY = y1 - y0;
  const k =
    spanX <= 0 && spanY <= 0 ? 1 : Math.min(spanX > 0 ? w / spanX : Infinity, spanY > 0 ? hgt / spanY : Infinity);
  const cx = (x0 + x1) / 2,
    cy = (y0 + y1) / 2;
  return { k, px: (x) => width / 2 + (x - cx) * k, py: (y) => height / 2 - (y - cy) * k };
}

/** The index of the point nearest (x, y) within `maxDistance` pixels; -1 if none. */
export function nearestPoint(points: readonly { px: number; py: number }[], x: number, y: number, maxDistance: number) {
  let best = -1,
    bestD = maxDistance * maxDistance;
  points.forEach((p, i) => {
    const d = (p.px - x) ** 2 + (p.py - y) ** 2;
    if (d <= bestD) {
      best = i;
      bestD = d;
    }
  });
  return best;
}

/** A point's radius: `base` without importance; with it, from `base` · 0.6 (no effect) to
 *  `base` · 2 (the largest effect), by area (√ of the share of the largest effect). */
export function pointRadius(base: number, share: number | null): number {
  if (share === null) return base;
  const s = Math.max(0, Math.min(1, share));
  return base * (0.6 + 1.4 * Math.sqrt(s));
}

/** "the two axes hold 47 % of the differences between heads". */
export function explainedText(explained: number): string {
  const p = Math.round(Math.max(0, Math.min(1, explained)) * 100);
  return `the two axes hold ${p} % of the differences between heads`;
}

/** What the map is, in one line (the downloads' note). */
export function headMapNote(r: HeadMapResult): string {
  return `the map does not depend on the explorer's text: it was measured on ${r.source} (${r.texts} texts, ${r.rows} query rows); distance = sqrt of the mean Jensen-Shannon divergence (bits) of two heads' attention rows, x and y its classical MDS; ${explainedText(r.explained)}`;
}

/** The JSON download: the server's reply with heads counted from 1 (as on the page), the model,
 *  the numbering and the note that no text is involved. */
export function headMapJson(r: HeadMapResult, modelName: string): string {
  return JSON.stringify(
    {
      schema: r.schema,
      model: modelName,
      numbering: EXPORT_NUMBERING,
      text: null,
      note: headMapNote(r),
      source: r.source,
      texts: r.texts,
      rows: r.rows,
      n_layer: r.n_layer,
      n_head: r.n_head,
      explained: r.explained,
      eigenvalues: r.eigenvalues,
      heads: r.heads.map((p) => ({ layer: p.layer + 1, head: p.head + 1, kv_head: p.kv_head + 1, x: p.x, y: p.y })),
      distance: r.distance,
    },
    null,
    1,
  );
}

/** The CSV download: `#` lines (what, model, the text-independence note, the numbering), then one
 *  row per head counted from 1: layer, head, kv_head, x, y. */
export function headMapCsv(r: HeadMapResult, modelName: string): string {
  const lines = [
    '# headscope head map: every head placed by how alike its attention is over a corpus',
    `# model: ${modelName}`,
    `# text: none; ${headMapNote(r)}`,
    `# numbering: ${EXPORT_NUMBERING}`,
    'layer,head,kv_head,x,y',
  ];
  for (const p of r.heads) lines.push([p.layer + 1, p.head + 1, p.kv_head + 1, p.x, p.y].map(csvField).join(','));
  return lines.join('\r\n') + '\r\n';
}
