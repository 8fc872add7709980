import { describe, expect, it } from 'vitest';
import { decodeByteLevel, entryShown, entryText, linksText, readable, recognisedText, tokenText } from './tokens';

describe('byte-level BPE entries (GPT-2 bytes_to_unicode, inverted)', () => {
  it('decodes the symbols for space, line break and two-byte characters', () => {
    expect(decodeByteLevel('Ġthe')).toBe(' the');
    expect(decodeByteLevel('Ċ')).toBe('\n');
    expect(decodeByteLevel('ĉ')).toBe('\t');
    expect(decodeByteLevel('Ã¼')).toBe('ü');
    expect(decodeByteLevel('ÃŁ')).toBe('ß');
    expect(decodeByteLevel('ĠcafÃ©')).toBe(' café');
    // a three-byte character: € is E2 82 AC
    expect(decodeByteLevel('âĤ¬')).toBe('€');
  });
  it('leaves plain ASCII as it is', () => {
    expect(decodeByteLevel("'t")).toBe("'t");
    expect(decodeByteLevel('open')).toBe('open');
  });
  it('refuses entries that are not byte-level', () => {
    expect(decodeByteLevel('café')).toBeNull(); // é alone is not UTF-8
    expect(decodeByteLevel('日本')).toBeNull(); // outside the 256 symbols
    expect(decodeByteLevel('a b')).toBeNull(); // a raw space is not one of the symbols
  });
  it('shows a piece of a split character as U+FFFD when the entry is surely byte-level', () => {
    expect(decodeByteLevel('ĠÃ')).toBe(' \uFFFD');
  });
});

describe('entries as text', () => {
  it('turns SentencePiece ▁ into spaces and keeps WordPiece entries', () => {
    expect(entryText('▁Paris')).toBe(' Paris');
    expect(entryText('##ing')).toBe('##ing');
    expect(entryText('[CLS]')).toBe('[CLS]');
    expect(entryText('café')).toBe('café');
  });
  it('reads like the server: trimmed, whitespace-only tokens as ␣ ↵ ⇥', () => {
    expect(readable(' the')).toBe('the');
    expect(readable(' ')).toBe('␣');
    expect(readable('\n\n')).toBe('↵↵');
    expect(readable('\t')).toBe('⇥');
    expect(entryShown('Ġ')).toBe('␣');
    expect(entryShown('Ċ')).toBe('↵');
    expect(entryShown('ĠGrÃ¼ÃŁe')).toBe('Grüße');
    expect(entryShown('▁▁')).toBe('␣␣');
  });
  it('prefers the server’s display form', () => {
    expect(tokenText({ text: 'Ġthe', display: 'the' })).toBe('the');
    expect(tokenText({ text: 'Ã¼' })).toBe('ü');
    expect(tokenText({ text: 'Ċ' })).toBe('↵');
  });
  it('decodes the shifted symbols of the control bytes and of 0x7F–0xA0', () => {
    expect(entryText('Ā')).toBe('\u0000'); // byte 0 is the first shifted symbol, U+0100
    expect(entryText('Ġ')).toBe(' '); // byte 0x20 is the 33rd, U+0120
    expect(entryText('ġ')).toBe('\u007f'); // byte 0x7F comes next, U+0121
  });
});

describe('link lists with the page’s labels', () => {
  const labels = ['Gr', 'ü', 'ß', '↵', 'the'];
  const links = [
    { query: 3, key: 4, weight: 0.6612 },
    { query: 2, key: 1, weight: 0.58 },
  ];
  it('writes each link as the server does, with readable tokens', () => {
    expect(linksText(links, labels)).toBe("'↵' → 'the' 0.66; 'ß' → 'ü' 0.58");
  });
  it('replaces the list after the first ": \'" of a role sentence', () => {
    const server = "on this text a pronoun points back to an earlier word: 'Ċ' → 'the' 0.66";
    expect(recognisedText(server, links.slice(0, 1), labels)).toBe(
      "on this text a pronoun points back to an earlier word: '↵' → 'the' 0.66",
    );
    expect(recognisedText('no list here', links, labels)).toBe('no list here');
  });
});
