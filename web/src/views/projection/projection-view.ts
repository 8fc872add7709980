// Concat(head₀ … head_{h−1}) · W_O with the model's real sizes, and for one chosen token the real
// numbers: every head's output, their concatenation, its projection by W_O, and the same output
// written as a sum of one contribution per head (each with its norm).

import type { Decomposition, ModelInfo, RunResult } from '../../lib/api';
import { readableOn } from '../../lib/colour';
import { tokenShown } from '../../lib/units';
import { h, clear, hideTooltip, showTooltip, sizeCanvas } from '../../lib/dom';
import { fixed, signed, subscript, tokenLabel } from '../../lib/format';
import { pixelsCanvas, signedPixels } from '../../lib/heatmap';
import { signedLegend, signedLegendItems } from '../../lib/legend';
import { maxAbs } from '../../lib/matrix';
import { escapeXml, sceneToSvg, type Scene, type SceneItem } from '../../lib/scene';
import { THEME } from '../../lib/theme';
import { row } from '../../lib/wire';
import { groupColour, kvGroups } from '../../lib/kv-groups';
import { headReport, roleInfo, roleStyle, type ExportableView, type ViewContext } from '../context';
import { headName, headShort, layerName, layerWithIndex } from '../../lib/numbering';

/** Width in CSS px of one number in the long (d_model) strips and in the head-output strips. */
const WIDE_CELL = 2;
const HEAD_CELL = 12;
const STRIP_HEIGHT = 16;

export interface ProjectionCallbacks {
  selectToken(token: number): void;
}

/** The formula's title with subscripts, heads counted from 1: Concat(head₁, …, head₁₂) · W_O. */
export function concatFormula(nHead: number): string {
  return `Concat(head${subscript(1)}, …, head${subscript(nHead)}) · W_O`;
}

/** A size as the page writes it: 1,024. */
const size = (n: number) => n.toLocaleString('en');

/** The head boxes, and under grouped- or multi-query attention a bar per head in its KV group's
 *  colour with the group's name under the bars (KV heads counted from 1, as the heads are). */
function headBoxes(model: ModelInfo, roleColours: string[], headW: number, y: number, boxH: number): SceneItem[] {
  const items: SceneItem[] = [];
  for (let i = 0; i < model.n_head; i++) {
    const colour = roleColours[i] ?? THEME.accent;
    const x = 10 + i * (headW + 4);
    items.push({ kind: 'rect', x, y, w: headW, h: boxH, fill: colour, rx: 3 });
    items.push({
      kind: 'text',
      x: x + headW / 2,
      y: y + boxH / 2 + 4,
      text: headShort(i),
      size: headW > 24 ? 11 : 10,
      fill: readableOn(colour),
      anchor: 'middle',
      weight: 'bold',
    });
  }
  for (const g of kvGroups(model) ?? []) {
    for (const hd of g.heads)
      items.push({
        kind: 'rect',
        x: 10 + hd * (headW + 4),
        y: y + boxH + 3,
        w: headW,
        h: 6,
        fill: groupColour(g.kv),
        rx: 2,
      });
    const x0 = 10 + g.heads[0] * (headW + 4),
      x1 = 10 + g.heads[g.heads.length - 1] * (headW + 4) + headW;
    items.push({
      kind: 'text',
      x: (x0 + x1) / 2,
      y: y + boxH + 22,
      text: `KV ${g.kv + 1}`,
      size: 11,
      fill: groupColour(g.kv),
      anchor: 'middle',
      weight: 'bold',
    });
  }
  return items;
}

/** The lines under the diagram: the heads' sizes, how the shapes multiply, and what the heads
 *  share under grouped- or multi-query attention. */
export function diagramNotes(model: ModelInfo): string[] {
  const concatDim = model.n_head * model.d_head;
  const [woOut, woIn] = model.w_o_shape;
  const notes = [
    `T tokens. Each of the ${model.n_head} heads gives T × ${size(model.d_head)} (d_head = ${size(model.d_head)}); side by side: T × ${size(concatDim)}.`,
    `W_O is stored as ${size(woOut)} × ${size(woIn)} (output × input), so the layer multiplies by its transpose:`,
    `[T × ${size(woIn)}] · [${size(woIn)} × ${size(woOut)}] = [T × ${size(woOut)}].`,
  ];
  if (concatDim === model.d_model)
    notes.push(
      `Here h × d_head = ${model.n_head} × ${model.d_head} = d_model = ${size(model.d_model)}: the heads split the model width between them.`,
    );
  else
    notes.push(
      `Here h × d_head = ${size(concatDim)} is not d_model = ${size(model.d_model)}: W_O also changes the width.`,
    );
  const groups = kvGroups(model);
  if (groups && model.n_kv_head === 1)
    notes.push(
      `Multi-query attention: all ${model.n_head} heads share one K and one V (each head still has its own Q, so its own attention pattern).`,
    );
  else if (groups) {
    notes.push(
      `Grouped-query attention: ${model.n_head} query heads share ${model.n_kv_head} key/value heads (each head still has its own Q, so its own attention pattern).`,
    );
    for (const g of groups) notes.push(`${g.label} share one K and one V.`);
  }
  return notes;
}

/** The diagram of the formula with the model's sizes, shapes written so that they multiply
 *  (also used in exports). */
export function diagramScene(model: ModelInfo, roleColours: string[], width: number, withNotes = true): Scene {
  const concatDim = model.n_head * model.d_head;
  const [woOut, woIn] = model.w_o_shape;
  const y = 20,
    boxH = 46;
  const headW = Math.max(22, Math.min(30, (width * 0.36) / model.n_head - 4));
  const items: SceneItem[] = headBoxes(model, roleColours, headW, y, boxH);
  const band = kvGroups(model) ? 30 : 0;
  let x = 10 + model.n_head * (headW + 4);
  const sign = (text: string, size: number) =>
    items.push({ kind: 'text', x, y: y + boxH / 2 + 7, text, size, fill: THEME.muted, anchor: 'middle' });
  const box = (bw: number, title: string, sub: string, fill: string) => {
    items.push({ kind: 'rect', x, y, w: bw, h: boxH, fill, stroke: THEME.border, rx: 6 });
    const mid = x + bw / 2;
    items.push({
      kind: 'text',
      x: mid,
      y: y + 20,
      text: title,
      size: 13,
      fill: THEME.text,
      anchor: 'middle',
      weight: 'bold',
    });
    items.push({ kind: 'text', x: mid, y: y + 37, text: sub, size: 12, fill: THEME.text, anchor: 'middle' });
    x += bw;
  };
  x += 18;
  sign('→', 22);
  x += 18;
  box(130, 'Concat', `T × ${size(concatDim)}`, THEME.panelAlt);
  x += 16;
  sign('·', 22);
  x += 16;
  box(130, 'W_Oᵀ', `${size(woIn)} × ${size(woOut)}`, THEME.codeBg);
  x += 16;
  sign('=', 18);
  x += 16;
  box(120, 'Output', `T × ${size(woOut)}`, THEME.panelAlt);
  const notes = withNotes ? diagramNotes(model) : [];
  notes.forEach((text, i) =>
    items.push({
      kind: 'text',
      x: 10,
      y: y + boxH + band + 18 + i * 17,
      text,
      size: 12,
      fill: i < 4 ? THEME.muted : THEME.text,
    }),
  );
  // About 6.7 px per character of 12 px text: the notes fit the exported picture.
  const notesWidth = 20 + Math.max(0, ...notes.map((n) => n.length)) * 6.7;
  return {
    width: Math.max(withNotes ? width : 0, x + 10, notesWidth),
    height: y + boxH + band + 10 + notes.length * 17,
    background: THEME.panel,
    items,
  };
}

function strip(
  values: Float32Array,
  limit: number,
  cell: number,
  describe: (i: number, v: number) => string[],
  segment = 0,
): HTMLCanvasElement {
  const canvas = document.createElement('canvas');
  canvas.className = 'strip';
  canvas.dataset.n = String(values.length);
  const width = values.length * cell;
  const ctx = sizeCanvas(canvas, width, STRIP_HEIGHT);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(pixelsCanvas(signedPixels(values, values.length, 1, limit)), 0, 0, width, STRIP_HEIGHT);
  if (segment > 0) {
    ctx.fillStyle = THEME.text;
    for (let s = segment; s < values.length; s += segment) ctx.fillRect(s * cell - 0.5, 0, 1, STRIP_HEIGHT);
  }
  // As wide as its cells, narrowed to the column it sits in, but never below one pixel per
  // number: a strip longer than that scrolls inside its column (.vector-strip).
  canvas.style.width = `min(${width}px, max(100%, ${values.length}px))`;
  const show = (e: MouseEvent) => {
    const r = canvas.getBoundingClientRect();
    const at = Math.floor(((e.clientX - r.left) / Math.max(1, r.width)) * values.length);
    const i = Math.min(values.length - 1, Math.max(0, at));
    showTooltip(e.clientX, e.clientY, describe(i, values[i]));
  };
  canvas.addEventListener('mousemove', show);
  canvas.addEventListener('click', show); // touch: a tap shows the value
  canvas.addEventListener('mouseleave', hideTooltip);
  return canvas;
}

function topKey(rowValues: Float32Array, run: RunResult): { token: string; weight: number } {
  let best = 0;
  for (let k = 1; k < rowValues.length; k++) if (rowValues[k] > rowValues[best]) best = k;
  const t = run.tokens[best];
  return { token: t ? tokenShown(t) : '?', weight: rowValues[best] };
}

export class ProjectionView implements ExportableView {
  readonly el: HTMLElement;
  private title: HTMLElement;
  private diagram: HTMLElement;
  private notes: HTMLElement;
  private tokens: HTMLElement;
  private pickNote: HTMLElement;
  private body: HTMLElement;
  private ctx: ViewContext | null = null;
  private dec: Decomposition | null = null;
  /** The run whose tokens the chips show (rebuilt only for a new text). */
  private chipsFor: RunResult | null = null;

  constructor(private readonly callbacks: ProjectionCallbacks) {
    this.title = h('h2', { id: 'projection-title' });
    this.diagram = h('div', { class: 'diagram', id: 'concat-diagram' });
    this.notes = h('ul', { class: 'diagram-notes', id: 'concat-notes' });
    this.tokens = h('div', { class: 'chips token-chips', role: 'group', 'aria-label': 'token to decompose' });
    this.body = h('div', { class: 'decomposition', id: 'decomposition' });
    this.pickNote = h(
      'p',
      { class: 'muted' },
      'Pick a token ([ and ] step through them). Colours: red below zero, blue above, white at zero; hover a cell for its value.',
    );
    this.el = h(
      'section',
      { class: 'panel projection', 'aria-labelledby': 'projection-title' },
      h('p', { class: 'kicker' }, 'Multi-head attention'),
      this.title,
      h(
        'p',
        {},
        'Every head returns a short vector per token. The layer lays these vectors side by side and multiplies the result by one learned matrix, W_O. ',
        'Because the multiplication is linear, the output is exactly the sum of what each head adds on its own, which is how the layer blends the heads.',
      ),
      this.diagram,
      this.notes,
      h('h3', {}, 'Follow one token through W_O'),
      this.pickNote,
      this.tokens,
      this.body,
    );
  }

  /** dec null: still loading, or, when `unavailable` says why, not to be had (embedded results). */
  update(ctx: ViewContext, dec: Decomposition | null, unavailable?: string): void {
    this.ctx = ctx;
    this.dec = dec;
    const { model, state, run } = ctx;
    this.title.textContent = concatFormula(model.n_head);
    const colours = Array.from(
      { length: model.n_head },
      (_, i) => roleInfo(model, headReport(ctx, state.layer, i).roles.primary.id).color,
    );
    this.diagram.innerHTML = sceneToSvg(diagramScene(model, colours, 900, false), () => '');
    this.diagram.querySelector('svg')?.setAttribute('role', 'img');
    this.diagram
      .querySelector('svg')
      ?.setAttribute(
        'aria-label',
        escapeXml(
          `${concatFormula(model.n_head)}: ${model.n_head} heads of ${model.d_head} dimensions, W_O ${model.w_o_shape.join(' × ')}, output ${model.d_model}`,
        ),
      );
    clear(this.notes);
    for (const note of diagramNotes(model)) this.notes.appendChild(h('li', {}, note));

    // A long (streamed) text has no decomposition to pick a token for: no chips, only the note.
    this.pickNote.hidden = this.tokens.hidden = !!run.streamed;
    if (this.chipsFor !== run && !run.streamed) {
      this.chipsFor = run;
      clear(this.tokens);
      run.tokens.forEach((t, i) =>
        this.tokens.appendChild(
          h(
            'button',
            {
              type: 'button',
              class: 'chip token' + (t.special ? ' special' : ''),
              'data-token': i,
              onclick: () => this.callbacks.selectToken(i),
            },
            tokenLabel(tokenShown(t), 18),
          ),
        ),
      );
    }
    for (const chip of this.tokens.children)
      chip.setAttribute('aria-pressed', String(Number(chip.getAttribute('data-token')) === state.token));
    clear(this.body);
    if (!dec) {
      this.body.appendChild(
        h('p', { class: 'muted', id: 'decomposition-note' }, unavailable ?? 'Loading the decomposition…'),
      );
      return;
    }
    this.renderVectors(ctx, dec);
  }

  private renderVectors(ctx: ViewContext, dec: Decomposition): void {
    const { model, run, state } = ctx;
    const t = run.tokens[dec.token];
    const token = t ? tokenShown(t) : '?';
    const H = dec.n_head,
      dh = dec.d_head,
      D = dec.d_model;
    const headLimit = maxAbs(dec.head_outputs.data) || 1;
    const outLimit = Math.max(maxAbs(dec.attn_output.data), maxAbs(dec.projection.data)) || 1;
    const contribLimit = maxAbs(dec.contributions.data) || 1;
    const norms = dec.contribution_norms.data;
    const maxNorm = Math.max(...norms) || 1;
    const dim = (what: string) => (i: number, v: number) => [`${what}, dimension ${i}`, signed(v)];

    const grid = h('div', { class: 'vector-grid' });
    const rowEl = (
      label: Node | string,
      canvas: HTMLCanvasElement,
      value: Node | string,
      attrs: Record<string, string> = {},
    ) =>
      grid.appendChild(
        h(
          'div',
          { class: 'vector-row', ...attrs },
          h('div', { class: 'vector-label' }, label),
          h('div', { class: 'vector-strip' }, canvas),
          h('div', { class: 'vector-value' }, value),
        ),
      );
    const step = (n: number, text: string) =>
      grid.appendChild(h('h4', { class: 'vector-step' }, h('span', { class: 'step-no' }, String(n)), text));

    step(
      1,
      `Each head's output for “${tokenLabel(token, 20)}” in ${layerName(dec.layer)}: ${H} vectors of d_head = ${dh} numbers`,
    );
    for (let i = 0; i < H; i++) {
      const report = headReport(ctx, state.layer, i);
      const role = roleInfo(model, report.roles.primary.id);
      const top = topKey(row(dec.attention_rows, i), run);
      rowEl(
        h('span', {}, h('span', { class: 'badge small', style: roleStyle(role.color) }, headShort(i))),
        strip(row(dec.head_outputs, i), headLimit, HEAD_CELL, dim(`${headName(i)} output`)),
        `‖·‖ ${fixed(dec.head_output_norms.data[i], 2)} · reads “${tokenLabel(top.token, 12)}” ${fixed(top.weight, 2)}`,
        { 'data-head-output': String(i) },
      );
    }
    step(2, `Concatenation: ${H} × ${size(dh)} = ${size(H * dh)} numbers, head by head`);
    rowEl(
      'concat',
      strip(
        dec.concat.data,
        headLimit,
        WIDE_CELL,
        (i, v) => [`concat ${i} = ${headName(Math.floor(i / dh))}, dim ${i % dh}`, signed(v)],
        dh,
      ),
      `${size(H * dh)} numbers`,
    );
    step(
      3,
      `Projection: [1 × ${size(dec.w_o_shape[1])}] · W_Oᵀ [${size(dec.w_o_shape[1])} × ${size(dec.w_o_shape[0])}] = ${size(D)} numbers (W_O is ${size(dec.w_o_shape[0])} × ${size(dec.w_o_shape[1])}), plus the bias b_O`,
    );
    rowEl('concat · W_Oᵀ', strip(dec.projection.data, outLimit, WIDE_CELL, dim('projection')), `${size(D)} numbers`);
    rowEl(
      '+ b_O',
      strip(dec.bias.data, outLimit, WIDE_CELL, dim('bias')),
      `‖b_O‖ ${fixed(Math.hypot(...dec.bias.data), 2)}`,
    );
    rowEl(
      '= output',
      strip(dec.attn_output.data, outLimit, WIDE_CELL, dim('attention output')),
      h(
        'span',
        { class: 'output-check', id: 'projection-check' },
        `model's output; differs by ≤ ${dec.check.projection_max_abs_error.toExponential(1)}`,
      ),
    );
    step(
      4,
      `The same output as a sum: each head's ${size(dh)} numbers times its ${size(dh)} rows of W_Oᵀ give that head's contribution (${size(D)} numbers)`,
    );
    for (let i = 0; i < H; i++) {
      const bar = h(
        'span',
        { class: 'norm-bar' },
        h('span', { style: `width: ${((norms[i] / maxNorm) * 100).toFixed(1)}%` }),
      );
      rowEl(
        headShort(i),
        strip(row(dec.contributions, i), contribLimit, WIDE_CELL, dim(`${headName(i)} contribution`)),
        h('span', { class: 'norm', 'data-norm': String(norms[i]) }, bar, `‖c‖ ${fixed(norms[i], 3)}`),
        { 'data-contribution': String(i) },
      );
    }
    const ok = dec.check.sum_max_abs_error <= 1e-3 * Math.max(1, outLimit);
    grid.appendChild(
      h(
        'p',
        { class: 'sum-check ' + (ok ? 'ok' : 'bad'), id: 'sum-check' },
        `Σ over the ${H} contributions + b_O = the attention output: largest difference ${dec.check.sum_max_abs_error.toExponential(1)} ${ok ? '✓ (floating-point rounding)' : '✗'}`,
      ),
    );
    this.body.append(
      h(
        'div',
        { class: 'legend-row' },
        signedLegend(headLimit, 'head outputs and concatenation'),
        signedLegend(outLimit, 'projection, bias and output'),
        signedLegend(contribLimit, 'contributions'),
      ),
      grid,
    );
  }

  exportParts(): (string | number)[] {
    return this.ctx ? [`layer${this.ctx.state.layer + 1}`, `token${this.ctx.state.token}`, 'wo'] : ['wo'];
  }

  scene(): Scene | null {
    if (!this.ctx) return null;
    const { model, state, run } = this.ctx;
    const colours = Array.from(
      { length: model.n_head },
      (_, i) => roleInfo(model, headReport(this.ctx!, state.layer, i).roles.primary.id).color,
    );
    const diagram = diagramScene(model, colours, 900);
    const items: SceneItem[] = [
      {
        kind: 'text',
        x: 10,
        y: 22,
        text: `${concatFormula(model.n_head)} · ${model.name} · ${layerWithIndex(state.layer)}`,
        size: 15,
        fill: THEME.text,
        weight: 'bold',
      },
      ...diagram.items.map((it) => ('y' in it ? { ...it, y: it.y + 30 } : it)),
    ];
    let y = diagram.height + 40;
    const dec = this.dec;
    if (dec) {
      const t = run.tokens[dec.token];
      const token = t ? tokenShown(t) : '?';
      const H = dec.n_head,
        D = dec.d_model;
      const contribLimit = maxAbs(dec.contributions.data) || 1;
      const outLimit = Math.max(maxAbs(dec.attn_output.data), maxAbs(dec.projection.data)) || 1;
      items.push({
        kind: 'text',
        x: 10,
        y,
        text: `Per-head contributions for “${token}” (each ${D} numbers) and their norms`,
        size: 13,
        fill: THEME.text,
        weight: 'bold',
      });
      y += 12;
      for (let i = 0; i < H; i++) {
        items.push({ kind: 'text', x: 10, y: y + 12, text: headShort(i), size: 11, fill: THEME.text });
        items.push({
          kind: 'image',
          x: 44,
          y,
          w: D * WIDE_CELL,
          h: 14,
          pixels: signedPixels(row(dec.contributions, i), D, 1, contribLimit),
        });
        items.push({
          kind: 'text',
          x: 52 + D * WIDE_CELL,
          y: y + 12,
          text: `‖c‖ ${fixed(dec.contribution_norms.data[i], 3)}`,
          size: 11,
          fill: THEME.muted,
        });
        y += 18;
      }
      y += 6;
      items.push({ kind: 'text', x: 10, y: y + 12, text: 'out', size: 11, fill: THEME.text, weight: 'bold' });
      items.push({
        kind: 'image',
        x: 44,
        y,
        w: D * WIDE_CELL,
        h: 14,
        pixels: signedPixels(dec.attn_output.data, D, 1, outLimit),
      });
      items.push({
        kind: 'text',
        x: 52 + D * WIDE_CELL,
        y: y + 12,
        text: `Σ c + b_O, max diff ${dec.check.sum_max_abs_error.toExponential(1)}`,
        size: 11,
        fill: THEME.muted,
      });
      y += 30;
      items.push(...signedLegendItems(44, y, 260, contribLimit, 'contributions', THEME.text));
      items.push(...signedLegendItems(340, y, 260, outLimit, 'output', THEME.text));
      y += 50;
    }
    return {
      width: Math.max(diagram.width, 44 + (dec?.d_model ?? 0) * WIDE_CELL + 200),
      height: y + 10,
      background: THEME.panel,
      items,
    };
  }
}
