// A module resolution hook for the `tetraloop` bin when it runs the TypeScript sources: the
// workspace packages resolve through their `tetraloop-source` export condition (their src/), as
// `node --conditions=tetraloop-source` would, instead of their built dist/.
export async function resolve(specifier, context, nextResolve) {
  return nextResolve(specifier, { ...context, conditions: [...context.conditions, 'tetraloop-source'] });
}
