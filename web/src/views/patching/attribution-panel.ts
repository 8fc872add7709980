// The estimate side of a Patching sweep (POST /api/patch with "method": "attribution" or "both"):
// a note saying what a first-order estimate is and what it cost, with "both" the estimate's own
// layer × head map beside the exact one (the view holds that one; both share a colour scale), the
// agreement of the two (Spearman's ρ, the shared top 10) and the sites the estimate misranks most,
// and, when edges were asked for on a decoder, the strongest estimated edges between heads.

import type { PatchEffect, PatchMethod, PatchResult } from '../../lib/api';
import { h } from '../../lib/dom';
import type { SceneItem } from '../../lib/scene';
import { THEME } from '../../lib/theme';
import { EffectGrid } from './effect-grid';
import {
  agreementLine,
  agreementVerdict,
  edgeName,
  estimateNote,
  misrankedRows,
  siteName,
  topEdges,
  type MisrankedRow,
} from './gradients';
import type { GridCell, GridColumn, GridRow, PatchGrid } from './patch-grid';
import { METRIC_LABELS } from './patch-grid';

export interface AttributionPanelOptions {
  /** Where a cell is, in words (the first lines of its tooltip). */
  where(row: GridRow, column: GridColumn): string;
  clickable(row: GridRow, column: GridColumn): boolean;
  onCell(row: GridRow, column: GridColumn): void;
}

/** A normalised effect or metric with three decimals; none reads "–". */
function num(v: number | null | undefined): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return '–';
  return Math.abs(v) >= 100 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(2) : v.toFixed(3);
}

export class AttributionPanel {
  /** What the estimate is and what it cost (attribution and both). */
  readonly note = h('p', { class: 'muted small patch-method-note', id: 'patch-method-note', hidden: true });
  /** The estimate's map beside the exact one (both). */
  readonly grid: EffectGrid;
  readonly estimate: HTMLElement;
  /** The agreement line, its reading and the misranked sites (both). */
  readonly agreement = h('section', { class: 'patch-agreement', id: 'patch-agreement', hidden: true });
  /** The strongest estimated edges (attribution or both, with edges, decoders). */
  readonly edges = h('section', { class: 'patch-edges', id: 'patch-edges', hidden: true });
  private shown: { result: PatchResult; grid: PatchGrid; limit: number } | null = null;

  constructor(private readonly options: AttributionPanelOptions) {
    this.grid = new EffectGrid({
      id: 'patch-grid-estimate',
      label: 'estimated normalised effect of each site (attribution patching)',
      describe: (row, column, cell) => this.describe(row, column, cell),
      clickable: (row, column) => options.clickable(row, column),
      onCell: (row, column) => options.onCell(row, column),
    });
    this.estimate = h(
      'figure',
      { class: 'patch-map', id: 'patch-map-estimate', hidden: true },
      h('figcaption', { id: 'patch-map-estimate-title' }, 'Estimate (attribution patching)'),
      h('div', { class: 'scroll-x' }, this.grid.el),
    );
  }

  clear(): void {
    this.shown = null;
    this.grid.clear();
    for (const el of [this.note, this.estimate, this.agreement, this.edges]) el.hidden = true;
  }

  /** Draws what `result` holds for its method; `grid` is the estimate's grid (both), drawn with ±limit. */
  show(result: PatchResult, method: PatchMethod, grid: PatchGrid | null, limit: number, edgesAsked: boolean): void {
    this.clear();
    const a = result.attribution;
    if (method === 'exact' || !a) return;
    this.note.hidden = false;
    this.note.textContent = estimateNote(method, a, result.passes);
    if (method === 'both' && grid) {
      this.shown = { result, grid, limit };
      this.estimate.hidden = false;
      this.grid.update(grid, limit);
    }
    if (method === 'both' && result.agreement) this.drawAgreement(result);
    if (edgesAsked) this.drawEdges(result);
  }

  /** Frames the clicked head in the estimate's map too. */
  select(sender: { layer: number; head: number } | null): void {
    if (this.shown) this.grid.update(this.shown.grid, this.shown.limit, sender);
  }

  private describe(row: GridRow, column: GridColumn, cell: GridCell | null): string[] {
    const r = this.shown?.result;
    const where = this.options.where(row, column);
    if (!cell) return [where, 'not estimated (outside the layers asked for)'];
    return [
      where,
      `estimated normalised effect ${num(cell.normalised)}`,
      `estimated ${r ? METRIC_LABELS[r.metric] : 'metric'} ${num(cell.value)} (clean ${num(r?.clean)}, corrupted ${num(r?.corrupt)})`,
    ];
  }

  private drawAgreement(result: PatchResult): void {
    const g = result.agreement!;
    // The server lists the largest rank differences, which may be none at all.
    const rows = misrankedRows(result.results ?? [], result.attribution?.results ?? [], g.misranked).filter(
      (r) => r.estimateRank !== r.exactRank,
    );
    this.agreement.hidden = false;
    this.agreement.setAttribute('data-spearman', String(g.spearman ?? ''));
    this.agreement.setAttribute('data-top10', String(g.top10_shared));
    this.agreement.replaceChildren(
      h('h3', {}, 'How well the estimate agrees with exact patching'),
      h('p', { id: 'patch-agreement-line', class: 'patch-agreement-line' }, agreementLine(g)),
      h('p', { class: 'muted small', id: 'patch-agreement-verdict' }, agreementVerdict(g.spearman)),
      ...(rows.length === 0
        ? [h('p', { class: 'small', id: 'patch-misranked-none' }, 'Every site has the same rank in both maps.')]
        : [
            h(
              'p',
              { class: 'small' },
              `Sites the estimate misranks most (ranks by normalised effect, 1 of ${g.sites} the largest):`,
            ),
            h('ol', { class: 'patch-misranked', id: 'patch-misranked' }, ...rows.map((r) => this.misrankedItem(r))),
          ]),
    );
  }

  private misrankedItem(r: MisrankedRow): HTMLElement {
    const e: PatchEffect = r.exact;
    return h(
      'li',
      { 'data-layer': e.layer, 'data-head': e.head ?? null, 'data-position': e.position ?? null },
      h('strong', { class: 'patch-site-name' }, siteName(e)),
      `: exact rank ${r.exactRank} (normalised ${num(e.normalised)}) · estimate rank ${r.estimateRank ?? '–'} (normalised ${num(r.estimate?.normalised)})`,
    );
  }

  private drawEdges(result: PatchResult): void {
    const all = result.attribution?.edges ?? [];
    const top = topEdges(all);
    this.edges.hidden = false;
    this.edges.setAttribute('data-count', String(all.length));
    this.edges.replaceChildren(
      h('h3', {}, `Strongest estimated edges (${top.length} of ${all.length})`),
      h(
        'p',
        { class: 'muted small' },
        'An edge is one head’s output reaching one input of a later head (its queries, keys or values) or the logits directly. Its number is the estimated change of the metric if only that edge carried the patched value; normalised as the map is.',
      ),
      top.length
        ? h(
            'ol',
            { class: 'patch-edge-list', id: 'patch-edge-list' },
            ...top.map((e) =>
              h(
                'li',
                { 'data-value': e.value, 'data-sender': e.sender.join('.'), 'data-input': e.input },
                h('span', { class: 'patch-site-name' }, edgeName(e)),
                h(
                  'span',
                  { class: 'patch-edge-value' },
                  `${e.value! >= 0 ? '+' : ''}${num(e.value)} (normalised ${num(e.normalised)})`,
                ),
              ),
            ),
          )
        : h('p', { class: 'status' }, 'No edge was estimated for this sweep.'),
    );
  }

  /** The estimate's map as scene items at (x, y) under its title (both), and the height taken. */
  sceneItems(x: number, y: number): { items: SceneItem[]; width: number; height: number } {
    if (!this.shown) return { items: [], width: 0, height: 0 };
    const title: SceneItem = {
      kind: 'text',
      x,
      y: y + 12,
      text: 'Estimate (attribution patching), same colour scale',
      size: 12,
      fill: THEME.text,
      weight: 'bold',
    };
    const grid = this.grid.sceneItems(x, y + 20);
    return { items: [title, ...grid.items], width: grid.width, height: 20 + grid.height };
  }
}
