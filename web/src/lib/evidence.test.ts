import { describe, expect, it } from 'vitest';
import { EVIDENCE_MISSING, EVIDENCE_OFF, evidenceStatus } from './evidence';

describe('evidenceStatus', () => {
  it('says nothing when the model says nothing (an embedded result)', () => {
    expect(evidenceStatus({})).toBeNull();
  });

  it('tells how to get the evidence when it is not measured yet', () => {
    const s = evidenceStatus({
      corpus_evidence: {
        source: 'not measured yet for this model (no /tmp/x.json): run `make evidence` or pass --measure-corpus',
        syntax: false,
        coreference: false,
      },
    });
    expect(s).toEqual({ measured: false, text: EVIDENCE_MISSING });
    expect(s!.text).toMatch(/^No corpus evidence for this model yet: syntactic and coreference roles are off\./);
    expect(s!.text).toContain('make evidence');
    expect(s!.text).toContain('--measure-corpus');
  });

  it('says the server was started without it (--no-corpus)', () => {
    const s = evidenceStatus({
      corpus_evidence: { source: 'none: roles come from the text and the probe', syntax: false, coreference: false },
    });
    expect(s).toEqual({ measured: false, text: EVIDENCE_OFF });
  });

  it('names the corpus when the evidence is there', () => {
    const source = '300 UD PUD sentences (heads chosen on 300 UD EWT dev sentences), 176 GAP examples (chosen on 173)';
    expect(evidenceStatus({ corpus_evidence: { source, syntax: true, coreference: true } })).toEqual({
      measured: true,
      text: `Syntactic and coreference roles come from corpus evidence measured on ${source}.`,
    });
    expect(evidenceStatus({ corpus_evidence: { source, syntax: true, coreference: false } })!.text).toMatch(
      /^Syntactic roles come from/,
    );
  });
});
