// Corpus evidence in words: whether the model's syntactic and coreference roles are on, what they
// were measured on, and, when they are off, how to get them (GET /api/model's corpus_evidence).
// Shown where roles are explained: the model overview's role legend, the head panel, the head map.

import type { ModelInfo } from './api';
import { h } from './dom';

export const EVIDENCE_MISSING =
  'No corpus evidence for this model yet: syntactic and coreference roles are off. Run `make evidence` (or start the server with `--measure-corpus`) to measure it once (about 2–3 minutes).';

export const EVIDENCE_OFF =
  'No corpus evidence: this server was started without it (`--no-corpus`), so syntactic and coreference roles are off. Run `make evidence` once (about 2–3 minutes) and start the server without `--no-corpus` (or with `--measure-corpus`) to use them.';

export interface EvidenceStatus {
  /** Whether corpus evidence backs the syntactic and coreference roles. */
  measured: boolean;
  /** The line the page shows. */
  text: string;
}

/** The model's corpus evidence in words; null where the model says nothing about it (an embedded result). */
export function evidenceStatus(model: Pick<ModelInfo, 'corpus_evidence'>): EvidenceStatus | null {
  const ev = model.corpus_evidence;
  if (!ev) return null;
  const source = ev.source.trim();
  if (/^none\b/i.test(source)) return { measured: false, text: EVIDENCE_OFF };
  if (/^not measured yet/i.test(source) || source === '') return { measured: false, text: EVIDENCE_MISSING };
  const which =
    ev.syntax && ev.coreference
      ? 'Syntactic and coreference roles'
      : ev.syntax
        ? 'Syntactic roles'
        : ev.coreference
          ? 'Coreference roles'
          : 'Corpus roles';
  return { measured: true, text: `${which} come from corpus evidence measured on ${source}.` };
}

/** The evidence line as a paragraph (id given), or null when the model says nothing about it. */
export function evidenceNote(model: Pick<ModelInfo, 'corpus_evidence'>, id: string): HTMLElement | null {
  const status = evidenceStatus(model);
  if (!status) return null;
  return h(
    'p',
    {
      class: `evidence-note small${status.measured ? ' muted' : ' notice'}`,
      id,
      'data-evidence': status.measured ? 'present' : 'missing',
      role: status.measured ? null : 'note',
    },
    ...withCode(status.text),
  );
}

/** Text with `…` spans as <code> (commands and options). */
function withCode(text: string): (string | HTMLElement)[] {
  return text.split('`').map((part, i) => (i % 2 === 1 ? h('code', {}, part) : part));
}
