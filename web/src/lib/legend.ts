// The colour legend: a 0–1 bar for attention weights under the chosen scale, or a ±limit bar for
// signed values. Drawn in the page (DOM) and as scene items for exports.
//
// The bar is laid out by colour position: position p shows the colour-table entry p, and the
// tick of weight w sits at scaleValue(w), which is where that weight's colour lies.

import {
  DIVERGING,
  SEQUENTIAL,
  SEQUENTIAL_LUT,
  lutColour,
  rgbToHex,
  scaleTicks,
  signedColour,
  type ScaleName,
} from './colour';
import { h } from './dom';
import { MASKED_COLOURS } from './heatmap';
import type { SceneItem } from './scene';
import { MAP_QUANTITY, type MapView } from './maps';

export const SCALE_TITLES: Record<ScaleName, string> = {
  linear: 'attention weight (linear, 0–1)',
  log: 'attention weight (log scale, 0.001–1)',
  contrast: 'attention weight (√ contrast, 0–1)',
};

/** The legend's title for the maps shown: 'norm-weighted share (linear, 0–1)' and so on. */
export function legendTitle(scale: ScaleName, view: MapView = 'weights'): string {
  return view === 'weights' ? SCALE_TITLES[scale] : SCALE_TITLES[scale].replace('attention weight', MAP_QUANTITY[view]);
}

export const MASKED_LABEL = 'masked (future token)';

/** The legend's label for hatched cells: with a sliding window, keys too far back are hidden too. */
export function maskedLabel(window = 0): string {
  return window > 0 ? `masked (future token, or more than ${window} tokens back)` : MASKED_LABEL;
}
const HATCH = `repeating-linear-gradient(45deg, ${MASKED_COLOURS[0]} 0 4px, ${MASKED_COLOURS[1]} 4px 8px)`;

/** A legend element for attention weights; for a causal model it also explains the hatched
 *  cells above the diagonal (keys after the query, which the model cannot attend to). */
export function attentionLegend(scale: ScaleName, causal = false, view: MapView = 'weights', window = 0): HTMLElement {
  const bar = h('div', {
    class: 'legend-bar',
    style: `background: linear-gradient(to right, ${SEQUENTIAL.join(', ')})`,
  });
  const ticks = h('div', { class: 'legend-ticks' });
  for (const t of scaleTicks(scale))
    ticks.appendChild(h('span', { style: `left: ${(t.position * 100).toFixed(2)}%` }, t.label));
  return h(
    'figure',
    {
      class: 'legend',
      'data-scale': scale,
      'data-maps': view,
      'aria-label': `colour legend: ${legendTitle(scale, view)}`,
    },
    h('figcaption', {}, legendTitle(scale, view)),
    bar,
    ticks,
    ...(causal
      ? [
          h(
            'div',
            { class: 'legend-masked' },
            h('span', { class: 'masked-swatch', style: `background: ${HATCH}` }),
            maskedLabel(window),
          ),
        ]
      : []),
  );
}

/** A legend for signed values from −limit to +limit. */
export function signedLegend(limit: number, caption: string): HTMLElement {
  const bar = h('div', {
    class: 'legend-bar',
    style: `background: linear-gradient(to right, ${DIVERGING.join(', ')})`,
  });
  const ticks = h('div', { class: 'legend-ticks' });
  for (const [label, p] of signedTicks(limit)) ticks.appendChild(h('span', { style: `left: ${p * 100}%` }, label));
  return h(
    'figure',
    { class: 'legend', 'aria-label': `colour legend: ${caption}` },
    h('figcaption', {}, caption),
    bar,
    ticks,
  );
}

function signedTicks(limit: number): [string, number][] {
  const fmt = (v: number) => (Math.abs(v) >= 0.01 || v === 0 ? v.toFixed(2) : v.toExponential(1));
  return [
    [fmt(-limit), 0],
    ['0', 0.5],
    [fmt(limit), 1],
  ];
}

const BAR_STEPS = 64;

/** Scene items of an attention legend at (x, y), `width` wide, 44 px tall. */
export function attentionLegendItems(
  x: number,
  y: number,
  width: number,
  scale: ScaleName,
  textColour: string,
  causal = false,
  view: MapView = 'weights',
  window = 0,
): SceneItem[] {
  const items: SceneItem[] = [
    { kind: 'text', x, y: y + 10, text: legendTitle(scale, view), size: 11, fill: textColour },
  ];
  for (let i = 0; i < BAR_STEPS; i++) {
    const fill = rgbToHex(lutColour(SEQUENTIAL_LUT, (i + 0.5) / BAR_STEPS));
    items.push({ kind: 'rect', x: x + (i * width) / BAR_STEPS, y: y + 16, w: width / BAR_STEPS + 0.5, h: 10, fill });
  }
  for (const t of scaleTicks(scale)) {
    const tx = x + t.position * width;
    items.push({ kind: 'line', x1: tx, y1: y + 26, x2: tx, y2: y + 30, stroke: textColour, width: 1 });
    items.push({ kind: 'text', x: tx, y: y + 41, text: t.label, size: 10, fill: textColour, anchor: 'middle' });
  }
  if (causal) {
    // Beside the bar title: a small hatched square and its meaning.
    const sx = x + width - (window > 0 ? 230 : 130);
    for (let i = 0; i < 4; i++)
      items.push({ kind: 'rect', x: sx + i * 3, y: y + 1, w: 3, h: 11, fill: MASKED_COLOURS[i % 2] });
    items.push({ kind: 'text', x: sx + 16, y: y + 10, text: maskedLabel(window), size: 10, fill: textColour });
  }
  return items;
}

/** Scene items of a signed legend, same size as the attention legend. */
export function signedLegendItems(
  x: number,
  y: number,
  width: number,
  limit: number,
  caption: string,
  textColour: string,
): SceneItem[] {
  const items: SceneItem[] = [{ kind: 'text', x, y: y + 10, text: caption, size: 11, fill: textColour }];
  for (let i = 0; i < BAR_STEPS; i++) {
    const v = (((i + 0.5) / BAR_STEPS) * 2 - 1) * limit;
    items.push({
      kind: 'rect',
      x: x + (i * width) / BAR_STEPS,
      y: y + 16,
      w: width / BAR_STEPS + 0.5,
      h: 10,
      fill: signedColour(v, limit),
    });
  }
  for (const [label, p] of signedTicks(limit))
    items.push({
      kind: 'text',
      x: x + p * width,
      y: y + 41,
      text: label,
      size: 10,
      fill: textColour,
      anchor: 'middle',
    });
  return items;
}
