// The importance badge of a head: "#3" with a bar as wide as its ablation effect over the largest
// one on this text, and the number with its unit in the tooltip. Empty until importance is measured.

import { h } from '../../lib/dom';
import type { ViewContext } from '../context';
import { barFraction, effectOf, rankOf, rankText } from './importance';

export function importanceBadge(
  ctx: Pick<ViewContext, 'model' | 'importance'>,
  layer: number,
  head: number,
): HTMLElement | string {
  const imp = ctx.importance;
  if (!imp) return '';
  const i = layer * ctx.model.n_head + head;
  const text = rankText(imp, i);
  return h(
    'span',
    {
      class: 'importance-badge',
      'data-rank': String(rankOf(imp, i)),
      'data-effect': String(effectOf(imp, i) ?? ''),
      title: `${text}: the change in the model’s output when this head alone is removed from this text`,
      'aria-label': text,
    },
    h('span', { class: 'importance-bar' }, h('span', { style: `width: ${(barFraction(imp, i) * 100).toFixed(1)}%` })),
    `#${rankOf(imp, i)}`,
  );
}
