// ESLint for the explorer's TypeScript (src/) and its browser tests (e2e/): the recommended rules of
// ESLint and typescript-eslint. Formatting is Prettier's job (.prettierrc.json); both run in `make test`.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import globals from 'globals';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['src/**/*.ts', '*.ts'],
    languageOptions: { globals: globals.browser },
    // An unused parameter or binding is named with a leading underscore on purpose (as tsc's
    // noUnusedParameters allows): an interface method that ignores its arguments, a skipped field.
    rules: {
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' },
      ],
    },
  },
  {
    files: ['e2e/**/*.mjs', '*.js'],
    languageOptions: { globals: { ...globals.node, ...globals.browser } },
  },
);
