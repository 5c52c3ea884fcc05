import type { Caller } from '../core/http/caller.ts';
import { NotFound, Problem, ValidationFailed } from '../core/problems.ts';
import type { FieldErrors } from './views.ts';

/** A store's connection to its WooCommerce site, as its owner sees it (the keys are never shown back). */
export interface WooCommerceConnectionState {
  siteUrl: string;
  status: 'connected' | 'disconnected';
  connectedAt: string;
  disconnectedAt: string | null;
  disconnectReason: string | null;
  reconciledAt: string | null;
}

/**
 * What the dashboard asks of the WooCommerce feature (its service has this shape): the same
 * caller-taking methods as its API routes, so the service's own access rules answer for both.
 */
export interface WooCommerceConnections {
  connectWithKeys(caller: Caller, domain: string, input: { siteUrl: string; consumerKey: string; consumerSecret: string }): Promise<WooCommerceConnectionState>;
  authorizationUrl(caller: Caller, domain: string, siteUrl: string): Promise<string>;
  connectionFor(caller: Caller, domain: string): Promise<WooCommerceConnectionState>;
  disconnect(caller: Caller, domain: string): Promise<WooCommerceConnectionState>;
}

/** What the owner typed, shown again with the errors; never the consumer secret. */
export interface WooCommerceTyped {
  siteUrl: string;
  consumerKey: string;
}

/** A form the service refused: the status to answer, and the errors to show beside the fields (or above them). */
export interface WooCommerceRefusal {
  status: number;
  errors: FieldErrors;
}

/** The WooCommerce page's forms, through the WooCommerce feature's service. */
export class WooCommerceForms {
  constructor(private readonly connections: WooCommerceConnections) {}

  /** The store's connection, or null when it was never connected. */
  async connection(caller: Caller, shop: string): Promise<WooCommerceConnectionState | null> {
    try {
      return await this.connections.connectionFor(caller, shop);
    } catch (err) {
      if (err instanceof NotFound) return null;
      throw err;
    }
  }

  /**
   * The keys pasted in the form, as typed: the service checks their shape as the API does, then
   * the site's address, then tries the keys on the site before storing anything.
   */
  connect(caller: Caller, shop: string, fields: Record<string, string | undefined>): Promise<WooCommerceConnectionState> {
    return this.connections.connectWithKeys(caller, shop, { siteUrl: fields.siteUrl?.trim() ?? '', consumerKey: fields.consumerKey?.trim() ?? '', consumerSecret: fields.consumerSecret?.trim() ?? '' });
  }

  /** WooCommerce's approval page on the owner's site, where the site makes the keys and posts them to the service. */
  approvalUrl(caller: Caller, shop: string, fields: Record<string, string | undefined>): Promise<string> {
    return this.connections.authorizationUrl(caller, shop, fields.siteUrl?.trim() ?? '');
  }

  disconnect(caller: Caller, shop: string): Promise<WooCommerceConnectionState> {
    return this.connections.disconnect(caller, shop);
  }
}

/** What the owner typed, for the form shown again (the consumer secret is not). */
export function typedIn(fields: Record<string, string | undefined>): WooCommerceTyped {
  return { siteUrl: fields.siteUrl ?? '', consumerKey: fields.consumerKey ?? '' };
}

/**
 * A refusal the form can show: bad fields or keys the site refused (400, the service's pointers
 * into the API's body named as the form's fields), or a site that could not be reached (502,
 * said above the form). Anything else is not the owner's to mend, and is thrown on.
 */
export function refusalOf(err: unknown): WooCommerceRefusal | undefined {
  if (err instanceof ValidationFailed) return { status: 400, errors: err.errors.map((error) => ({ pointer: error.pointer.replace(/^\/body(?=\/)/, ''), message: error.message })) };
  if (err instanceof Problem && err.slug === 'upstream-failed') return { status: err.status, errors: [{ pointer: '/', message: err.detail }] };
  return undefined;
}
