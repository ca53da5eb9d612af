/**
 * [WEB74] A run's name as every page says it: the name its node was given when it started
 * ("Forever run", from its Code node's name then), else its code's name with " run". One function
 * for the server that names a new run and for each page that shows one (the operator's page read
 * "Run of Forever" where the run's own page, its list and the nav read "Forever run").
 */
export function runName(own: string | null | undefined, codeName: string | null | undefined): string | null {
  if (own) return own
  return codeName ? `${codeName} run` : null
}
