export type { Domain } from './features.ts';
