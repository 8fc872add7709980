// How the page names layers and heads: counted from 1, as the lesson counts them ("Head 1" is the
// first head). The API, the URL (layer=, head=) and the CLI's tables use 0-based indices, so the
// full form says both: "Head 1 (index 0)". Every view names heads through these functions.

/** "Head 3" for index 2. */
export function headName(index: number): string {
  return `Head ${index + 1}`;
}

/** "Layer 4" for index 3. */
export function layerName(index: number): string {
  return `Layer ${index + 1}`;
}

/** "Head 3 (index 2)": the number people use and the index of the API and CLI. */
export function headWithIndex(index: number): string {
  return `${headName(index)} (index ${index})`;
}

/** "Layer 4 (index 3)". */
export function layerWithIndex(index: number): string {
  return `${layerName(index)} (index ${index})`;
}

/** Compact tag for tiles and file names: "L4 H3" (numbers, not indices). */
export function headTag(layer: number, head: number): string {
  return `L${layer + 1} H${head + 1}`;
}

/** "H3": a head's short label inside a layer. */
export function headShort(index: number): string {
  return `H${index + 1}`;
}

/** The note shown once near the controls. */
export const NUMBERING_NOTE =
  'Layers and heads are counted from 1 (Head 1 is the first head); the index in brackets is the 0-based number used by the API, the URL and the command line.';
