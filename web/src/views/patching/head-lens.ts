// The logit lens of one head in the Patching view (decoders, POST /api/head_lens): the head's own
// output at the clean prompt's last position, read straight through the unembedding. It says how
// much this head alone adds to each next-token logit — to the answer and to the wrong token (their
// difference is the head's direct share of the logit difference), and which tokens it raises and
// lowers most. An encoder has no next-token logits: the panel says so in a line and asks nothing.
//
// State: a click on another head replaces the panel at once and drops any reply for an earlier
// click; an edit of the clean prompt or of the answers (the inputs the lens read) dims what is
// shown and says that it belongs to the earlier prompts, as the sweep's grid does.

import type { HeadLensEntry, HeadLensRequest, HeadLensResult, ModelInfo } from '../../lib/api';
import { append, h } from '../../lib/dom';
import { download, exportName } from '../../lib/export';
import { fixed, tokenLabel, visibleToken } from '../../lib/format';
import { attentionKind, headRange } from '../../lib/kv-groups';
import { headTag } from '../../lib/numbering';

/** Tokens listed as raised most and as lowered most. */
export const HEAD_LENS_TOP_K = 8;

/** What the lens reads: the clean prompt and the tokens followed (the answer, then the wrong one). */
export interface LensInputs {
  text: string;
  tokens: string[];
}

export interface HeadLensOptions {
  headLens(request: HeadLensRequest): Promise<HeadLensResult>;
  /** The inputs now in the view's boxes, to tell whether the panel shows them. */
  current(): LensInputs;
  /** A failed request in the reader's words. */
  describeError(e: unknown): string;
}

/** The request for head (layer, head), 0-based, at the prompt's last token. */
export function headLensRequest(inputs: LensInputs, layer: number, head: number): HeadLensRequest {
  return { text: inputs.text, layer, head, tokens: inputs.tokens, top_k: HEAD_LENS_TOP_K };
}

/** "Logit lens of L24 H4 (index 23.3)": the page's numbers, then the API's indices. */
export function headLensTitle(layer: number, head: number): string {
  return `Logit lens of ${headTag(layer, head)} (index ${layer}.${head})`;
}

/** A direct effect on a logit with its sign and two decimals: "+0.37", "-2.49"; none reads "–". */
export function signedEffect(v: number | null | undefined): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return '–';
  return `${v >= 0 ? '+' : ''}${v.toFixed(2)}`;
}

/** The head's direct share of the logit difference answer − wrong (the first followed token's
 *  effect minus the second's); null unless two named tokens with effects were followed. */
export function directDifference(r: Pick<HeadLensResult, 'followed' | 'followed_prediction'>): number | null {
  const [a, b] = r.followed;
  if (r.followed_prediction || !a || !b || a.logit === null || b.logit === null) return null;
  return a.logit - b.logit;
}

/** A token's place among the head's effects on the whole vocabulary, counted from 1, and a note at
 *  either end: ["1 of 49152", "raised most"], ["27570 of 49152", ""], ["49152 of 49152", "lowered most"]. */
export function effectRank(rank: number, vocab: number): [place: string, end: string] {
  return [`${rank + 1} of ${vocab}`, rank === 0 ? 'raised most' : rank === vocab - 1 ? 'lowered most' : ''];
}

/** Under grouped-query attention, the key/value head the head reads and the heads sharing it;
 *  null where every head has its own keys and values. */
export function kvHeadText(
  model: Pick<ModelInfo, 'n_head' | 'n_kv_head' | 'kv_head_of'>,
  kvHead: number,
): string | null {
  if (model.n_kv_head >= model.n_head) return null;
  const group = model.kv_head_of.flatMap((kv, hd) => (kv === kvHead ? [hd] : []));
  return `It reads key/value head ${kvHead + 1} (index ${kvHead}), shared by ${headRange(group)} (${attentionKind(model)}).`;
}

/** The line an encoder gets instead of a lens. */
export function encoderLensLine(name: string): string {
  return `${name} is an encoder: it predicts no next token, so there are no logits to read a head through; the logit lens needs a decoder.`;
}

/** A token of the lens as the page writes tokens: a leading space as ␣, cut to 16 characters. */
export function headLensToken(text: string): string {
  return tokenLabel(visibleToken(text), 16);
}

export class HeadLensPanel {
  readonly el: HTMLElement;
  private title: HTMLElement;
  private intro: HTMLElement;
  private status: HTMLElement;
  private body: HTMLElement;
  private saveButton: HTMLButtonElement;
  /** Bumped by every click, clear and edit of the inputs: a reply for an older one is dropped. */
  private asked = 0;
  /** The inputs of the head shown or asked for (JSON), null when the panel is empty. */
  private key: string | null = null;
  private shown: { result: HeadLensResult; model: string } | null = null;

  constructor(private readonly options: HeadLensOptions) {
    this.title = h('h3', { id: 'head-lens-title' });
    this.intro = h(
      'p',
      { class: 'muted small' },
      'The head’s own output at the last position of the clean prompt, read straight through the unembedding: how much this head alone adds to each next-token logit. This is its direct effect; what later heads do with its output is left out (path patching below follows that).',
    );
    this.status = h('p', { class: 'status', id: 'head-lens-status', 'aria-live': 'polite' });
    this.body = h('div', { class: 'head-lens-body', id: 'head-lens-body' });
    this.saveButton = h(
      'button',
      { type: 'button', class: 'ghost', id: 'head-lens-json', hidden: true, onclick: () => this.download() },
      'Download the head’s lens (JSON)',
    );
    this.el = h(
      'section',
      { class: 'head-lens', id: 'head-lens', hidden: true, 'aria-labelledby': 'head-lens-title' },
      this.title,
      this.intro,
      this.status,
      this.body,
      this.saveButton,
    );
  }

  /** Hides the panel; a reply on its way is dropped. */
  clear(): void {
    this.asked++;
    this.key = null;
    this.shown = null;
    this.el.hidden = true;
    this.el.removeAttribute('data-state');
    this.body.replaceChildren();
  }

  /** The lens of head (layer, head), 0-based, on `inputs` (the prompts of the sweep clicked). */
  async show(model: ModelInfo, inputs: LensInputs, layer: number, head: number): Promise<void> {
    if (this.showing(inputs, layer, head)) return; // the same head again (another receiver input)
    const ask = ++this.asked;
    this.shown = null;
    this.key = JSON.stringify(inputs);
    this.el.hidden = false;
    this.el.classList.remove('stale');
    this.el.setAttribute('data-layer', String(layer));
    this.el.setAttribute('data-head', String(head));
    this.title.textContent = headLensTitle(layer, head);
    this.intro.hidden = !model.causal;
    this.body.replaceChildren();
    this.saveButton.hidden = true;
    if (!model.causal) return this.setState('encoder', encoderLensLine(model.name), true);
    if (this.key !== JSON.stringify(this.options.current())) return this.markStale();
    this.setState('running', `Reading ${headTag(layer, head)}’s output through the unembedding…`);
    try {
      const r = await this.options.headLens(headLensRequest(inputs, layer, head));
      if (ask !== this.asked) return;
      this.shown = { result: r, model: model.name };
      this.draw(r, model);
      this.saveButton.hidden = false;
      this.setState('ready', '');
    } catch (e) {
      if (ask !== this.asked) return;
      this.setState('error', this.options.describeError(e), true);
    }
  }

  /** Whether the panel shows, or is reading, head (layer, head) on `inputs` already. */
  private showing(inputs: LensInputs, layer: number, head: number): boolean {
    const d = this.el.dataset;
    return (
      this.key === JSON.stringify(inputs) &&
      d.layer === String(layer) &&
      d.head === String(head) &&
      (d.state === 'ready' || d.state === 'running')
    );
  }

  /** After an edit in the view: a panel whose inputs are no longer those in the boxes says so. */
  check(): void {
    if (this.key === null || this.el.getAttribute('data-state') === 'encoder') return;
    if (this.key !== JSON.stringify(this.options.current())) this.markStale();
  }

  private markStale(): void {
    this.asked++;
    this.el.classList.add('stale');
    this.setState(
      'stale',
      this.shown
        ? 'The clean prompt or the answers changed since this lens was read: it shows the head on the earlier prompts. Run the sweep again and click a head to read it on the new ones.'
        : 'The clean prompt or the answers changed since the sweep shown: run it again, then click a head to read its logit lens.',
    );
  }

  private setState(state: string, message: string, error = false): void {
    this.el.setAttribute('data-state', state);
    this.el.setAttribute('aria-busy', String(state === 'running'));
    this.status.className = error ? 'status error' : 'status';
    this.status.textContent = message;
  }

  private draw(r: HeadLensResult, model: ModelInfo): void {
    const diff = directDifference(r);
    const kv = kvHeadText(model, r.kv_head);
    this.body.replaceChildren();
    append(
      this.body,
      h(
        'p',
        { id: 'head-lens-read' },
        `Read at position ${r.position}, the last token of the clean prompt (“${headLensToken(r.token.display)}”).`,
        kv ? ` ${kv}` : '',
      ),
      diff !== null &&
        h(
          'p',
          { class: 'head-lens-diff', id: 'head-lens-diff', 'data-value': diff },
          'Direct effect on answer − wrong = ',
          h('strong', {}, signedEffect(diff)),
          h('span', { class: 'muted small' }, ' (logits: the part of the logit difference this head writes directly)'),
        ),
      h('div', { class: 'scroll-x' }, this.followedTable(r, model.vocab_size)),
      h(
        'div',
        { class: 'head-lens-lists' },
        this.list('Raises most', r.promoted, 'head-lens-promoted'),
        this.list('Lowers most', r.suppressed, 'head-lens-suppressed'),
      ),
      h('p', { class: 'muted small', id: 'head-lens-readout' }, `How it is read: ${r.readout}.`),
    );
  }

  /** The followed tokens: the answer and the wrong token (or the model's prediction). */
  private followedTable(r: HeadLensResult, vocab: number): HTMLTableElement {
    const names = r.followed_prediction ? ['Prediction'] : ['Answer', 'Wrong'];
    const th = (text: string, title?: string) => h('th', { scope: 'col', title: title ?? null }, text);
    return h(
      'table',
      { class: 'head-lens-followed', id: 'head-lens-followed' },
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          th('Token'),
          th('Direct effect', 'what the head alone adds to the token’s logit'),
          th('Rank', 'the token’s place among the head’s effects on the whole vocabulary, 1 = raised most'),
          th('Model’s logit', 'the model’s own logit of the token at this position'),
        ),
      ),
      h(
        'tbody',
        {},
        ...r.followed.map((t, i) =>
          h(
            'tr',
            { 'data-id': t.id, 'data-logit': t.logit, 'data-rank': t.rank },
            h(
              'th',
              { scope: 'row', title: `id ${t.id}: ${JSON.stringify(t.text)}` },
              h('span', { class: 'head-lens-role' }, names[i] ?? `Token ${i + 1}`),
              ' ',
              h('span', { class: 'head-lens-token' }, headLensToken(t.text)),
            ),
            h('td', { class: 'head-lens-value' }, signedEffect(t.logit)),
            this.rankCell(t.rank, vocab),
            h('td', { class: 'head-lens-value' }, fixed(t.model_logit)),
          ),
        ),
      ),
    );
  }

  private rankCell(rank: number, vocab: number): HTMLElement {
    const [place, end] = effectRank(rank, vocab);
    return h(
      'td',
      { class: 'head-lens-rank' },
      h('span', { class: 'head-lens-place' }, place),
      end && ' ',
      end && h('span', { class: 'head-lens-end' }, `(${end})`),
    );
  }

  private list(title: string, entries: readonly HeadLensEntry[], id: string): HTMLElement {
    return h(
      'div',
      { class: 'head-lens-list' },
      h('h4', { id: `${id}-title` }, title),
      h(
        'ol',
        { id, 'aria-labelledby': `${id}-title` },
        ...entries.map((t) =>
          h(
            'li',
            {
              'data-id': t.id,
              'data-logit': t.logit,
              title: `id ${t.id}: ${JSON.stringify(t.text)} · the model’s own logit ${fixed(t.model_logit)}`,
            },
            h('span', { class: 'head-lens-token' }, headLensToken(t.text)),
            h('span', { class: 'head-lens-value' }, signedEffect(t.logit)),
          ),
        ),
      ),
    );
  }

  private download(): void {
    const s = this.shown;
    if (!s) return;
    const name = exportName([s.model, 'head-lens', `layer${s.result.layer + 1}-head${s.result.head + 1}`], 'json');
    download(JSON.stringify(s.result, null, 2), name, 'application/json');
  }
}
