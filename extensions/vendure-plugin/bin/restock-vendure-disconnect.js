#!/usr/bin/env node
// Uninstalls the store from Restock: run it with the plugin's three settings in the environment,
// then remove RestockPlugin from vendure-config.ts.
'use strict';
const { disconnectFromRestock } = require('../dist/disconnect');

disconnectFromRestock({
  restockUrl: process.env.RESTOCK_URL,
  store: process.env.RESTOCK_STORE,
  signingSecret: process.env.RESTOCK_SIGNING_SECRET,
}).then(
  (status) => {
    if (status >= 200 && status < 300) console.log('Restock: the store is disconnected; remove RestockPlugin from vendure-config.ts.');
    else console.error(`Restock answered ${status}: nothing changed.`);
    process.exitCode = status >= 200 && status < 300 ? 0 : 1;
  },
  (err) => {
    console.error(`Restock could not be reached: ${err.message}`);
    process.exitCode = 1;
  },
);
