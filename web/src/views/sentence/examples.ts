// Example sentences, each chosen because some head of a trained model is known to react to it.

export interface ExampleSentence {
  label: string;
  text: string;
  /** What to look for. */
  hint: string;
}

export const EXAMPLES: readonly ExampleSentence[] = [
  {
    label: 'Pronoun',
    text: "The animal didn't cross the street because it was too tired.",
    hint: 'Which heads send "it" to "animal", and which to "street"?',
  },
  {
    label: 'Agreement',
    text: 'The keys to the old cabinet in the hall are missing.',
    hint: 'The verb "are" agrees with "keys", four words back, not with the nearer "cabinet" or "hall".',
  },
  {
    label: 'Repetition',
    text: 'Ada wrote the program, and then Ada wrote the program again.',
    hint: 'Repeated words show duplicate-token heads; the second copy can look up what followed the first.',
  },
  {
    label: 'Coreference',
    text: 'Maria told her brother that she would bring the map he had lost.',
    hint: 'Two pronouns, two antecedents: "she" → Maria, "he" → brother.',
  },
  {
    label: 'Punctuation',
    text: 'First, preheat the oven; then, once it is hot, bake the bread for forty minutes.',
    hint: 'Commas and semicolons often collect attention from heads with nothing better to do.',
  },
  {
    label: 'Long words',
    text: 'Unbelievably, the photosynthesising microorganisms outcompeted everything else.',
    hint: 'Rare words split into several pieces: switch between tokens and words to see them merged.',
  },
];
