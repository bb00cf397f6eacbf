// Hardhat's in-process EVM, the second client the contract suite runs on (scripts/test.sh):
// brownie starts it as `npx hardhat node --port <free port>` (network `hardhat-local`, added by
// scripts/setup.sh). Brownie compiles; Hardhat only runs the node. The settings mirror how
// brownie starts anvil: cancun rules (the contracts target cancun), zero base fee so that
// balances move only by what the contracts pay, 10 funded accounts from the same mnemonic.
module.exports = {
  solidity: "0.8.24",
  networks: {
    hardhat: {
      hardfork: "cancun",
      initialBaseFeePerGas: 0,
      blockGasLimit: 12_000_000,
      accounts: { count: 10 },
      // brownie expects reverted calls and transactions to come back as errors
      throwOnTransactionFailures: true,
      throwOnCallFailures: true,
    },
  },
};
