// The whole model at a glance: every layer × head as a thumbnail of its attention, badged with
// the colour and initials of its detected role. Click a thumbnail to study that head.

import { readableOn } from '../../lib/colour';
import { h, clear, hideTooltip, showTooltip, sizeCanvas } from '../../lib/dom';
import { fixed } from '../../lib/format';
import { matrixPixels, pixelsCanvas } from '../../lib/heatmap';
import { evidenceNote } from '../../lib/evidence';
import { attentionLegend, attentionLegendItems } from '../../lib/legend';
import { MAP_LABELS, mapHead, type MapView } from '../../lib/maps';
import { headMatrix, maxPool, type Matrix } from '../../lib/matrix';
import type { ScaleName } from '../../lib/colour';
import { shownMatrix } from '../../lib/display';
import { drawScene, type Pixels, type Scene, type SceneItem } from '../../lib/scene';
import { THEME } from '../../lib/theme';
import type { Tensor } from '../../lib/wire';
import { attentionKind, groupColour, kvGroups } from '../../lib/kv-groups';
import { sentenceCase } from '../../lib/format';
import { headReport, roleBadge, roleInfo, roleStyle, type ExportableView, type ViewContext } from '../context';
import { headShort, headWithIndex, layerName } from '../../lib/numbering';
import { maxPoolRect, overviewPart } from '../../lib/long';

export interface ModelCallbacks {
  select(layer: number, head: number): void;
}

const LABEL_W = 34;
const HEADER_H = 18;
const BADGE_H = 14;
const GAP = 6;

export class ModelView implements ExportableView {
  readonly el: HTMLElement;
  private canvas: HTMLCanvasElement;
  private legendSlot: HTMLElement;
  private roles: HTMLElement;
  private groupsNote: HTMLElement;
  /** Whether the corpus roles are on and on what they were measured (lib/evidence.ts). */
  private evidence: HTMLElement;
  private ctx: ViewContext | null = null;
  private thumbs: Pixels[] = [];
  private pooled: Matrix[] = [];
  /** What the thumbnails were pooled from: the attention, or a long text's text (its overviews). */
  private pooledFrom: { attention: Tensor | string; hideSpecial: boolean; units: number } | null = null;
  /** The maps shown (lib/maps.ts); rollout repeats each layer's one map along its row. */
  private maps: MapView = 'weights';
  private thumbScale: ScaleName | null = null;
  private thumb = 64;
  /** The thumbnails come from the pooled overviews (a long text). */
  private pooledThumbs = false;

  constructor(
    private readonly callbacks: ModelCallbacks,
    private readonly maxWidth: number,
  ) {
    this.canvas = h('canvas', {
      class: 'model-grid',
      id: 'model-grid',
      tabindex: 0,
      'aria-label': 'every head of the model; arrow keys move the selection',
    });
    this.canvas.addEventListener('mousemove', (e) => this.onMove(e));
    this.canvas.addEventListener('mouseleave', hideTooltip);
    this.canvas.addEventListener('click', (e) => {
      const c = this.cellAt(e.offsetX, e.offsetY);
      if (c) this.callbacks.select(c.layer, c.head);
    });
    this.legendSlot = h('div', { class: 'legend-slot' });
    this.roles = h('ul', { class: 'role-legend', id: 'role-legend' });
    this.groupsNote = h('p', { class: 'muted kv-groups-note', id: 'model-kv-groups' });
    this.evidence = h('div', { class: 'evidence-slot' });
    this.el = h(
      'section',
      { class: 'view model-view', 'aria-labelledby': 'model-title' },
      h('div', { class: 'view-head' }, h('h2', { id: 'model-title' }, 'Every head of the model'), this.legendSlot),
      h('p', { class: 'muted', id: 'model-intro' }),
      this.groupsNote,
      h('div', { class: 'scroll-x' }, this.canvas),
      this.roles,
      this.evidence,
    );
  }

  /** attention: [n_layer, n_head, U, U] (8-bit is plenty for thumbnails). */
  update(ctx: ViewContext, attention: Tensor): void {
    this.ctx = ctx;
    this.maps = ctx.maps;
    const { model, state, units } = ctx;
    this.setIntro(ctx);
    // Pooling every head is the costly part: redo it only for new data; a new scale only
    // recolours, and a new selection only redraws.
    const from = this.pooledFrom;
    if (
      !from ||
      from.attention !== attention ||
      from.hideSpecial !== state.hideSpecial ||
      from.units !== units.labels.length
    ) {
      this.pooled = [];
      for (let l = 0; l < model.n_layer; l++)
        for (let hd = 0; hd < model.n_head; hd++)
          this.pooled.push(
            maxPool(
              shownMatrix(headMatrix(attention, l, mapHead(ctx.maps, hd)), units, state.hideSpecial).matrix,
              this.thumbPixels(),
            ),
          );
      this.pooledFrom = { attention, hideSpecial: state.hideSpecial, units: units.labels.length };
      this.thumbScale = null;
    }
    this.finish(ctx);
  }

  /**
   * A long text (maps streamed): each thumbnail from its head's pooled overview, the largest
   * weight of each block of tokens, at token level. `overview(l)` gives layer l's overview
   * [n_head, 2, cells, cells]; the layers are read once per text, a few at a time, and only
   * their thumbnails are kept.
   */
  async updateStreamed(ctx: ViewContext, overview: (layer: number) => Promise<Tensor>): Promise<void> {
    const { model, run } = ctx;
    const info = run.overview!;
    this.setIntro(ctx, true);
    const from = this.pooledFrom;
    if (!from || from.attention !== run.text) {
      const pooled: Matrix[] = new Array(model.n_layer * model.n_head);
      const px = this.thumbPixels();
      const pool = async (l: number) => {
        const t = await overview(l);
        for (let hd = 0; hd < model.n_head; hd++) {
          const p = maxPoolRect(overviewPart(t, hd, 1, info.cells), info.cells, info.cells, px, px);
          pooled[l * model.n_head + hd] = { n: p.rows, data: p.data };
        }
      };
      // Three layers in flight at a time: the server answers each from the run it keeps.
      for (let l = 0; l < model.n_layer; l += 3)
        await Promise.all([l, l + 1, l + 2].filter((x) => x < model.n_layer).map(pool));
      this.pooled = pooled;
      this.pooledFrom = { attention: run.text, hideSpecial: false, units: info.cells };
      this.thumbScale = null;
    }
    this.ctx = ctx;
    this.maps = 'weights';
    this.finish(ctx);
  }

  /** Thumbnail side in device pixels: what a head is pooled to. */
  private thumbPixels(): number {
    return Math.ceil(this.thumb * Math.min(3, window.devicePixelRatio || 1));
  }

  /** `pooled`: the thumbnails come from the pooled overviews (a long text, updateStreamed). */
  private setIntro(ctx: ViewContext, pooled = false): void {
    const info = pooled ? ctx.run.overview : undefined;
    this.el.querySelector('#model-intro')!.textContent =
      'Rows are layers (input at the top), columns are heads. The coloured strip under each map names the role detected on this text. Under grouped- or multi-query attention the top line names the key/value head each column shares.' +
      (info
        ? ` ${ctx.run.streamed ? `A long text (${ctx.run.n_tokens} tokens) keeps no full maps` : `On a long text (${ctx.run.n_tokens} tokens) the thumbnails are pooled`}: each thumbnail shows the largest weight of every block of about ${Math.ceil(info.T / info.cells)} tokens, at token level with special tokens; the roles are measured on the whole text. Click a head to zoom into its exact weights in the head panel.`
        : ctx.maps === 'rollout'
          ? ' Rollout is one map per layer (every head and the residual so far), so each row repeats its layer’s map in every column; the roles are still each head’s.'
          : ctx.maps === 'norm'
            ? ' The maps are norm-weighted: α · ‖v W_O‖ per key, each row rescaled to sum 1.'
            : '');
    this.pooledThumbs = !!info;
    this.el.dataset.pooled = String(!!info);
    this.thumb = Math.max(24, Math.min(72, Math.floor((this.maxWidth - LABEL_W) / ctx.model.n_head) - GAP));
  }

  /** Colours the pooled thumbnails (again only for a new scale), draws the grid and the legends. */
  private finish(ctx: ViewContext): void {
    const { model, state } = ctx;
    if (this.thumbScale !== state.scale) {
      this.thumbs = this.pooled.map((m) => matrixPixels(m, state.scale, model.causal));
      this.thumbScale = state.scale;
    }
    this.draw();
    this.canvas.dataset.heads = String(this.thumbs.length);
    const groups = kvGroups(model);
    this.groupsNote.hidden = !groups;
    this.groupsNote.textContent = groups
      ? `${sentenceCase(attentionKind(model))}: ${model.n_head} query heads share ${model.n_kv_head === 1 ? 'one key/value head' : `${model.n_kv_head} key/value heads`}. ${groups.map((g) => g.label).join('; ')}.`
      : '';
    clear(this.legendSlot);
    this.legendSlot.appendChild(attentionLegend(state.scale, model.causal, this.maps));
    const counts = new Map<string, number>();
    for (const r of ctx.run.heads) counts.set(r.roles.primary.id, (counts.get(r.roles.primary.id) ?? 0) + 1);
    this.evidence.replaceChildren(...[evidenceNote(model, 'model-evidence')].filter((x) => x !== null));
    clear(this.roles);
    for (const role of model.roles) {
      const n = counts.get(role.id);
      if (!n) continue;
      this.roles.appendChild(
        h(
          'li',
          { title: role.description },
          h('span', { class: 'badge', style: roleStyle(role.color) }, roleBadge(role.name)),
          ` ${role.name}: ${n} head${n === 1 ? '' : 's'}`,
        ),
      );
    }
  }

  /** Height of the column headings: one more line for the KV-group labels under GQA. */
  private get headerH(): number {
    return this.ctx && kvGroups(this.ctx.model) ? HEADER_H + 18 : HEADER_H;
  }

  private get cellW(): number {
    return this.thumb + GAP;
  }
  private get cellH(): number {
    return this.thumb + BADGE_H + GAP;
  }

  private cellAt(x: number, y: number): { layer: number; head: number } | null {
    if (!this.ctx) return null;
    const head = Math.floor((x - LABEL_W) / this.cellW),
      layer = Math.floor((y - this.headerH) / this.cellH);
    if (x < LABEL_W || y < this.headerH || head >= this.ctx.model.n_head || layer >= this.ctx.model.n_layer)
      return null;
    return { layer, head };
  }

  private onMove(e: MouseEvent): void {
    const c = this.cellAt(e.offsetX, e.offsetY);
    if (!c || !this.ctx) return hideTooltip();
    const r = headReport(this.ctx, c.layer, c.head).roles;
    showTooltip(e.clientX, e.clientY, [
      `${layerName(c.layer)} · ${headWithIndex(c.head)}${kvGroups(this.ctx.model) ? ` (KV head ${this.ctx.model.kv_head_of[c.head] + 1})` : ''}: ${r.primary.label}`,
      r.primary.evidence,
      `score ${fixed(r.primary.score, 2)}; then ${r.secondary.name.toLowerCase()} ${fixed(r.secondary.score, 2)}`,
    ]);
  }

  private draw(): void {
    if (!this.ctx) return;
    const { model } = this.ctx;
    const width = LABEL_W + model.n_head * this.cellW,
      height = this.headerH + model.n_layer * this.cellH;
    drawScene(
      sizeCanvas(this.canvas, width, height),
      { width, height, background: THEME.panel, items: this.items() },
      pixelsCanvas,
    );
  }

  /** The grid as scene items with its top-left corner at (0, 0). */
  private items(dx = 0, dy = 0): SceneItem[] {
    const { model, state } = this.ctx!;
    const items: SceneItem[] = [];
    const groups = kvGroups(model);
    const top = groups ? 18 : 0;
    // Under GQA, a first heading line names each KV head over the query heads that share it,
    // with a bar in the group's colour; the H labels below take the same colour.
    if (groups)
      for (const g of groups) {
        const first = g.heads[0],
          last = g.heads[g.heads.length - 1];
        const consecutive = last - first + 1 === g.heads.length;
        for (const hd of g.heads)
          items.push({
            kind: 'rect',
            x: dx + LABEL_W + hd * this.cellW,
            y: dy + 14,
            w: this.thumb,
            h: 3,
            fill: groupColour(g.kv),
          });
        const cx = consecutive
          ? dx + LABEL_W + ((first + last + 1) * this.cellW - GAP) / 2
          : dx + LABEL_W + first * this.cellW;
        items.push({
          kind: 'text',
          x: cx,
          y: dy + 11,
          text: g.heads.length * this.cellW > 120 ? g.label : `KV ${g.kv}`,
          size: 10,
          fill: THEME.text,
          anchor: consecutive ? 'middle' : 'start',
          weight: 'bold',
        });
      }
    for (let hd = 0; hd < model.n_head; hd++)
      items.push({
        kind: 'text',
        x: dx + LABEL_W + hd * this.cellW + this.thumb / 2,
        y: dy + top + 12,
        text: headShort(hd),
        size: 10,
        fill: THEME.muted,
        anchor: 'middle',
      });
    for (let l = 0; l < model.n_layer; l++) {
      const y = dy + this.headerH + l * this.cellH;
      items.push({
        kind: 'text',
        x: dx + 4,
        y: y + this.thumb / 2 + 4,
        text: `L${l + 1}`,
        size: 11,
        fill: THEME.text,
        weight: 'bold',
      });
      for (let hd = 0; hd < model.n_head; hd++) {
        const x = dx + LABEL_W + hd * this.cellW;
        const role = roleInfo(model, headReport(this.ctx!, l, hd).roles.primary.id);
        items.push({ kind: 'image', x, y, w: this.thumb, h: this.thumb, pixels: this.thumbs[l * model.n_head + hd] });
        items.push({ kind: 'rect', x, y: y + this.thumb, w: this.thumb, h: BADGE_H, fill: role.color });
        items.push({
          kind: 'text',
          x: x + this.thumb / 2,
          y: y + this.thumb + 11,
          text: roleBadge(role.name),
          size: 9,
          fill: readableOn(role.color),
          anchor: 'middle',
          weight: 'bold',
        });
        const selected = l === state.layer && hd === state.head;
        items.push({
          kind: 'rect',
          x: x - 1,
          y: y - 1,
          w: this.thumb + 2,
          h: this.thumb + BADGE_H + 2,
          fill: 'none',
          stroke: selected ? THEME.focus : THEME.border,
          strokeWidth: selected ? 2.5 : 1,
        });
      }
    }
    return items;
  }

  exportParts(): (string | number)[] {
    return this.maps === 'weights' ? ['model', 'overview'] : ['model', 'overview', this.maps];
  }

  scene(): Scene | null {
    if (!this.ctx) return null;
    const { model, state } = this.ctx;
    const gridW = LABEL_W + model.n_head * this.cellW,
      gridH = this.headerH + model.n_layer * this.cellH;
    const items: SceneItem[] = [
      {
        kind: 'text',
        x: 12,
        y: 22,
        text: `${model.name}: ${model.n_layer} layers × ${model.n_head} heads, coloured by role (${this.pooledThumbs ? 'a long text: largest weight of each block of tokens' : `${state.level}s, ${MAP_LABELS[this.maps].toLowerCase()}`})`,
        size: 14,
        fill: THEME.text,
        weight: 'bold',
      },
      ...this.items(12, 34),
      ...attentionLegendItems(12, 34 + gridH + 10, 300, state.scale, THEME.text, model.causal, this.maps),
    ];
    let lx = 340;
    const counted = new Set(this.ctx.run.heads.map((r) => r.roles.primary.id));
    let ly = 34 + gridH + 14;
    for (const role of model.roles) {
      if (!counted.has(role.id)) continue;
      items.push({ kind: 'rect', x: lx, y: ly, w: 22, h: 13, fill: role.color, rx: 3 });
      items.push({
        kind: 'text',
        x: lx + 11,
        y: ly + 10,
        text: roleBadge(role.name),
        size: 9,
        fill: readableOn(role.color),
        anchor: 'middle',
        weight: 'bold',
      });
      items.push({ kind: 'text', x: lx + 28, y: ly + 10, text: role.name, size: 11, fill: THEME.text });
      lx += 150;
      if (lx > gridW - 100) {
        lx = 340;
        ly += 18;
      }
    }
    return { width: Math.max(gridW + 24, 640), height: ly + 40, background: THEME.panel, items };
  }
}
