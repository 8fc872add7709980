// "Ablate this head" in the head panel: the selected head's output is removed from this text's
// forward pass (POST /api/ablate) and the page shows what changed. Decoders: the next-token
// prediction after the last token before → after, and the mean next-token loss. Encoders: 1 − cos
// of the mean-pooled sentence embedding (the model's own use) and each layer's relative change,
// as a row of small bars.

import type { AblateResult, AblationMode } from '../../lib/api';
import { h, clear } from '../../lib/dom';
import { tokenLabel } from '../../lib/format';
import { headTag, layerName } from '../../lib/numbering';
import { effectText } from './importance';

const MODES: { id: AblationMode; label: string; help: string }[] = [
  { id: 'zero', label: 'zero', help: 'the head’s output set to 0 before W_O' },
  { id: 'mean', label: 'mean', help: 'the head’s output replaced by its mean over the server’s reference sentences' },
  {
    id: 'resample',
    label: 'resample',
    help: 'the head’s output taken from another sentence (one of the server’s reference sentences)',
  },
];

/** Runs the ablation of the selected head in a mode (the app supplies the text and the head). */
export type AblateHead = (mode: AblationMode) => Promise<AblateResult>;

export class AblateBox {
  readonly el: HTMLElement;
  private mode: HTMLSelectElement;
  private button: HTMLButtonElement;
  private out: HTMLElement;
  private key = '';
  private run: AblateHead | null = null;
  private label = '';

  constructor() {
    this.mode = h('select', { id: 'ablate-mode', 'aria-label': 'ablation mode' }) as HTMLSelectElement;
    for (const m of MODES) this.mode.appendChild(h('option', { value: m.id, title: m.help }, m.label));
    this.button = h(
      'button',
      { type: 'button', id: 'ablate-go', onclick: () => void this.go() },
      'Ablate this head',
    ) as HTMLButtonElement;
    this.out = h('div', { id: 'ablate-result', 'aria-live': 'polite' });
    this.el = h(
      'section',
      { class: 'ablate-box', id: 'ablate-box' },
      h('h3', {}, 'Remove this head'),
      h(
        'p',
        { class: 'muted small' },
        'Where a head looks is not what it does. Remove its output from the forward pass on this text and see how the model’s output changes (the other heads, and every layer before this one, are left as they were).',
      ),
      h('p', { class: 'small' }, 'Mode ', this.mode, ' ', this.button),
      this.out,
    );
  }

  /** key: text + head; a new key clears the last result. */
  update(key: string, label: string, run: AblateHead): void {
    this.run = run;
    this.label = label;
    if (key !== this.key) {
      this.key = key;
      clear(this.out);
    }
  }

  private async go(): Promise<void> {
    if (!this.run) return;
    const key = this.key;
    this.button.disabled = true;
    clear(this.out);
    this.out.append(h('p', { class: 'muted small' }, `Removing ${this.label} …`));
    try {
      const r = await this.run(this.mode.value as AblationMode);
      if (key !== this.key) return;
      clear(this.out);
      this.out.append(...describe(r, this.label));
    } catch (e) {
      if (key !== this.key) return;
      clear(this.out);
      this.out.append(h('p', { class: 'error small' }, (e as Error).message));
    } finally {
      this.button.disabled = false;
    }
  }
}

/** The result in words and a bar row of the per-layer change. */
export function describe(r: AblateResult, label: string): HTMLElement[] {
  const ref = r.reference ? `, from ${r.reference}` : '';
  const parts: HTMLElement[] = [];
  if (r.next_before && r.next_after && r.mean_loss_before !== undefined && r.mean_loss_after !== undefined) {
    const same = r.next_before.id === r.next_after.id;
    parts.push(
      h(
        'p',
        {
          id: 'ablate-next',
          'data-before': r.next_before.text,
          'data-after': r.next_after.text,
          'data-effect': String(r.effect),
        },
        'Next token after the text: ',
        h('strong', {}, `“${tokenLabel(r.next_before.text, 20)}”`),
        ` (p ${r.next_before.p.toFixed(3)}) → `,
        h('strong', {}, `“${tokenLabel(r.next_after.text, 20)}”`),
        ` (p ${r.next_after.p.toFixed(3)})${same ? ', the same token' : ''}.`,
      ),
      h(
        'p',
        { id: 'ablate-loss' },
        `Mean next-token loss ${r.mean_loss_before.toFixed(3)} → ${r.mean_loss_after.toFixed(3)} nats (Δ ${r.effect >= 0 ? '+' : ''}${effectText(r.effect)}); the top-1 prediction changed at ${r.top1_changed?.length ?? 0} of ${r.tokens} positions.`,
      ),
    );
  } else {
    parts.push(
      h(
        'p',
        { id: 'ablate-distance', 'data-effect': String(r.effect) },
        `Sentence embedding (mean of the last layer’s token vectors): 1 − cos = `,
        h('strong', {}, effectText(r.effect)),
        ` after removing ${label} (${r.mode} ablation${ref}). 0 means unchanged; two unrelated sentences of this model are typically 0.7–1 apart.`,
      ),
    );
  }
  const max = Math.max(...r.layer_change, 1e-12);
  const bars = h('div', {
    class: 'layer-change',
    id: 'ablate-layers',
    role: 'img',
    'aria-label': 'relative change of each layer’s output',
  });
  r.layer_change.forEach((v, l) =>
    bars.appendChild(
      h(
        'span',
        {
          class: 'layer-change-bar',
          title: `${layerName(l)}: ‖h′ − h‖ / ‖h‖ = ${effectText(v)}`,
          'data-value': String(v),
        },
        h('span', { style: `height: ${((v / max) * 100).toFixed(1)}%` }),
        h('span', { class: 'layer-change-label' }, String(l + 1)),
      ),
    ),
  );
  parts.push(
    h(
      'p',
      { class: 'muted small' },
      `Change of each layer’s output, ‖h′ − h‖ / ‖h‖ (largest ${effectText(max)}; layers before the head’s own are unchanged):`,
    ),
    bars,
  );
  if (r.next_before)
    parts.push(
      h(
        'p',
        { class: 'muted small' },
        `${r.mode} ablation${ref} of ${r.heads.map(([l, hd]) => headTag(l, hd)).join(', ')}.`,
      ),
    );
  return parts;
}
