import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      '**/dist/**',
      '**/node_modules/**',
      'bench/**/*.mjs',
      '**/*.mjs',
      '**/*.cjs',
      'vitest.config.ts',
    ],
  },
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: {
      parserOptions: { project: ['./tsconfig.eslint.json'], tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-restricted-syntax': [
        'error',
        { selector: 'TSEnumDeclaration', message: 'Use `as const` objects, not enum.' },
      ],
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['@agentmesh/*/*', '!@agentmesh/protocol/errors'],
              message:
                'Import a package through its public face (src/index.ts; @agentmesh/protocol/errors is the light entry of the error model, for startup paths).',
            },
            {
              group: ['../../*/src/*', '../../../packages/*/src/*', '**/packages/*/src/**'],
              message: 'No deep imports across packages.',
            },
          ],
        },
      ],
    },
  },
);
