"""The Agent Client Protocol front door (`heddle acp`): Zed, JetBrains, CodeCompanion and other
ACP clients drive the same core as Heddle's own protocol. Only this package imports the ACP SDK
(`agent-client-protocol`); `heddle serve` never loads it. See docs/acp.md."""
