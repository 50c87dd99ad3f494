/** Names for the document's schemas a client handles most; every one is in `Schemas`. */
import type { components, paths } from './generated/openapi.js';

/** Every named schema of the API's OpenAPI document. */
export type Schemas = components['schemas'];

export type RunRequest = Schemas['RunRequest'];
export type Graph = Schemas['Graph'];
export type RunAccepted = Schemas['RunAccepted'];
export type RunDocument = Schemas['RunDocument'];
export type RerunAccepted = Schemas['RerunAccepted'];
export type RunPage = Schemas['RunPage'];
export type RunListing = Schemas['RunListing'];
export type RunExplain = Schemas['RunExplain'];
export type NodeExplain = Schemas['NodeExplain'];
/** The filters and page of `GET /v1/runs`. */
export type RunSearch = NonNullable<paths['/v1/runs']['get']['parameters']['query']>;
export type RunStatus = RunDocument['status'];
export type NodeView = Schemas['NodeView'];
export type RunEvent = Schemas['RunEvent'];
export type EventsTruncated = Schemas['EventsTruncated'];
/** What an event stream yields: the run's events, and a notice when some were trimmed. */
export type StreamEvent = RunEvent | EventsTruncated;
export type MessageBody = Schemas['MessageBody'];
export type MessageAnswer = Schemas['MessageAnswer'];
export type SessionView = Schemas['SessionView'];
export type SessionPage = Schemas['SessionPage'];
export type SessionListing = Schemas['SessionListing'];
export type TranscriptHeader = Schemas['TranscriptHeader'];
export type TranscriptEntry = Schemas['TranscriptEntry'];
export type ApiErrorBody = Schemas['ApiError'];
export type ApiIssue = Schemas['ApiIssue'];
export type Lesson = Schemas['Lesson'];
export type AgentLessons = Schemas['AgentLessons'];
export type ApiKeyRecord = Schemas['ApiKeyRecord'];
export type KeyBody = Schemas['KeyBody'];
export type KeyCreated = Schemas['KeyCreated'];
export type ScheduleBody = Schemas['ScheduleBody'];
export type SchedulePatch = Schemas['SchedulePatch'];
export type ScheduleView = Schemas['ScheduleView'];
export type ScheduleList = Schemas['ScheduleList'];
export type EventBody = Schemas['EventBody'];
export type EventAccepted = Schemas['EventAccepted'];
export type Trigger = Schemas['Trigger'];
export type TriggerBody = Schemas['TriggerBody'];
export type TriggerList = Schemas['TriggerList'];
