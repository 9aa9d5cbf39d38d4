-- What a budget's subject used in the budget's current period, as the
-- watcher last measured it (every cycle, not audited: a measurement, not a
-- change). The API shows it with the limit left and the forecast to the
-- period's end. usage_period '' is never measured.
ALTER TABLE ledger_budgets ADD COLUMN usage_period   TEXT    NOT NULL DEFAULT '';
ALTER TABLE ledger_budgets ADD COLUMN usage_start_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ledger_budgets ADD COLUMN usage_end_ms   INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ledger_budgets ADD COLUMN used_money     TEXT    NOT NULL DEFAULT '0';
ALTER TABLE ledger_budgets ADD COLUMN used_card_ms   INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ledger_budgets ADD COLUMN usage_as_of_ms INTEGER NOT NULL DEFAULT 0;
