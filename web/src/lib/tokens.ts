// Tokens as text. The server sends how every token of the analysed text reads (TokenInfo.display,
// tokenizer.h token_display); where the page holds only a vocabulary entry (a server that sends no
// display form, a generated token), these helpers turn the entry into the text it stands for.
// Byte-level BPE (GPT-2, SmolLM2) writes every byte as a printable symbol: a space as Ġ, a line
// break as Ċ, the two bytes of ü as Ã¼ (Radford et al. 2019, bytes_to_unicode in GPT-2's
// encoder.py). SentencePiece (Llama, Gemma) writes a space as ▁.

/** bytes_to_unicode inverted: the byte each of the 256 printable symbols stands for. */
const BYTE_OF: ReadonlyMap<string, number> = (() => {
  const printable = (b: number) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  const map = new Map<string, number>();
  let shifted = 0;
  for (let b = 0; b < 256; b++) map.set(String.fromCodePoint(printable(b) ? b : 256 + shifted++), b);
  return map;
})();

/** The text a byte-level BPE entry stands for ("ĠcafÃ©" → " café"), or null when `entry` is not
 *  one: a character outside the 256 symbols, or bytes that are not UTF-8 although no symbol
 *  beyond U+00FF says that the entry is byte-level ("café" of a WordPiece vocabulary). A piece of
 *  a character split over two tokens reads as U+FFFD. */
export function decodeByteLevel(entry: string): string | null {
  const bytes: number[] = [];
  let shifted = false;
  for (const ch of entry) {
    const b = BYTE_OF.get(ch);
    if (b === undefined) return null;
    bytes.push(b);
    if (ch.codePointAt(0)! > 0xff) shifted = true;
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(new Uint8Array(bytes));
  } catch {
    return shifted ? new TextDecoder('utf-8').decode(new Uint8Array(bytes)) : null;
  }
}

/** The text a vocabulary entry stands for: SentencePiece's ▁ as a space, byte-level symbols
 *  decoded, anything else as it is ("##ing" of WordPiece, "[CLS]"). */
export function entryText(entry: string): string {
  if (entry.includes('\u2581')) return entry.replace(/\u2581/g, ' ');
  return decodeByteLevel(entry) ?? entry;
}

/** How a token reads on the page, as the server's token_display writes it: the text without the
 *  spaces around it; a token of whitespace only as ␣ (space), ↵ (line break), ⇥ (tab). */
export function readable(text: string): string {
  const trimmed = text.replace(/^[ \n\t\r]+|[ \n\t\r]+$/g, '');
  if (trimmed !== '' || text === '') return trimmed;
  return text.replace(/\r/g, '').replace(/\n/g, '↵').replace(/\t/g, '⇥').replace(/ /g, '␣');
}

/** A token of the analysed text as it reads: the server's display form, or the vocabulary entry
 *  decoded (entryText) and trimmed (readable) when the server sent none. */
export function tokenText(t: { text: string; display?: string }): string {
  return t.display ?? readable(entryText(t.text));
}

/** A vocabulary entry that is not part of the analysed text (a generated or predicted token). */
export function entryShown(entry: string): string {
  return readable(entryText(entry));
}

/** A head's strongest links on a text as the server words them ("'q' → 'k' 0.76; …",
 *  analysis/links.cc link_text), written with the page's token labels; at most 4 links. */
export function linksText(links: { query: number; key: number; weight: number | null }[], labels: string[]): string {
  return links
    .slice(0, 4)
    .map((l) => `'${labels[l.query] ?? '?'}' → '${labels[l.key] ?? '?'}' ${(l.weight ?? 0).toFixed(2)}`)
    .join('; ');
}

/** The server's sentence about the links that match a head's role ("…: 'q' → 'k' 0.76"), its list
 *  rewritten with the page's labels (the list follows the first ": '"). */
export function recognisedText(
  text: string,
  matching: { query: number; key: number; weight: number | null }[],
  labels: string[],
): string {
  const at = text.indexOf(": '");
  return at < 0 || matching.length === 0 ? text : text.slice(0, at + 2) + linksText(matching, labels);
}
