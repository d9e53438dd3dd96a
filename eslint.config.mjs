// ESLint (flat config): typescript-eslint's recommended rules for the library, its tests, the sample and the benches.
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'temp/**', 'coverage/**', '**/*.js', '**/*.mjs'] },
  ...tseslint.configs.recommended,
  {
    rules: {
      // Nest's DI and decorators need `any` in a few framework-facing signatures; each use is explicit.
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      // Nest modules and DTOs are classes by convention, some without members.
      '@typescript-eslint/no-extraneous-class': 'off',
      // Nest's decorators and DI take `Function` (ClassDecorator, ModuleRef.get); the library's signatures follow.
      '@typescript-eslint/no-unsafe-function-type': 'off',
    },
  },
);
