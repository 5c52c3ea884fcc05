import { checkOptions, type RestockPluginOptions } from './options';
import { signedHeaders } from './signature';

/**
 * Tells Restock the store leaves (the plugin's uninstall): Restock stops sending its alerts and
 * forgets its Admin API key. Resolves with Restock's answer status; throws when Restock cannot be reached.
 */
export async function disconnectFromRestock(options: RestockPluginOptions): Promise<number> {
  const checked = checkOptions(options);
  const body = JSON.stringify({ type: 'app.uninstalled' });
  const answer = await fetch(checked.deliveryUrl, {
    method: 'POST',
    body,
    headers: { 'content-type': 'application/json', ...signedHeaders(checked.key, body) },
    signal: AbortSignal.timeout(checked.timeoutMs),
    redirect: 'error',
  });
  await answer.arrayBuffer().catch(() => undefined);
  return answer.status;
}
