{{/* The release's full name, the prefix of every object. */}}
{{- define "sluice.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "sluice.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "sluice.labels" -}}
{{ include "sluice.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "sluice.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "sluice.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "sluice.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
{{- end -}}

{{/* The environment every role shares: Postgres, Temporal, logs, ports. */}}
{{- define "sluice.env" -}}
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ required "database.existingSecret names the Secret holding DATABASE_URL" .Values.database.existingSecret }}
      key: {{ .Values.database.key }}
- name: TEMPORAL_ADDRESS
  value: {{ .Values.temporal.address | quote }}
- name: TEMPORAL_NAMESPACE
  value: {{ .Values.temporal.namespace | quote }}
{{- with .Values.temporal.taskQueuePrefix }}
- name: TEMPORAL_TASK_QUEUE_PREFIX
  value: {{ . | quote }}
{{- end }}
{{- if .Values.temporal.tls.enabled }}
- name: TEMPORAL_TLS
  value: "true"
{{- with .Values.temporal.tls.serverName }}
- name: TEMPORAL_TLS_SERVER_NAME
  value: {{ . | quote }}
{{- end }}
{{- if .Values.temporal.tls.existingSecret }}
{{- if .Values.temporal.tls.caKey }}
- name: TEMPORAL_TLS_CA
  value: /etc/sluice/temporal-tls/{{ .Values.temporal.tls.caKey }}
{{- end }}
{{- if .Values.temporal.tls.certKey }}
- name: TEMPORAL_TLS_CERT
  value: /etc/sluice/temporal-tls/{{ .Values.temporal.tls.certKey }}
{{- end }}
{{- if .Values.temporal.tls.keyKey }}
- name: TEMPORAL_TLS_KEY
  value: /etc/sluice/temporal-tls/{{ .Values.temporal.tls.keyKey }}
{{- end }}
{{- end }}
{{- end }}
{{- if .Values.temporal.apiKey.existingSecret }}
- name: TEMPORAL_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .Values.temporal.apiKey.existingSecret }}
      key: {{ .Values.temporal.apiKey.key }}
{{- end }}
- name: SLUICE_LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
- name: SLUICE_ADMIN_ADDR
  value: "0.0.0.0:{{ .Values.ports.admin }}"
{{- with .Values.env }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The container fields every role shares; .role is its name. */}}
{{- define "sluice.container" -}}
{{- $ := .root -}}
name: {{ .role }}
image: {{ include "sluice.image" $ }}
imagePullPolicy: {{ $.Values.image.pullPolicy }}
args: [{{ .role | quote }}]
securityContext:
  {{- toYaml $.Values.securityContext | nindent 2 }}
{{- with $.Values.extraEnvFrom }}
envFrom:
  {{- toYaml . | nindent 2 }}
{{- end }}
volumeMounts:
  - name: tmp
    mountPath: /tmp
{{- if and $.Values.temporal.tls.enabled $.Values.temporal.tls.existingSecret }}
  - name: temporal-tls
    mountPath: /etc/sluice/temporal-tls
    readOnly: true
{{- end }}
{{- end -}}

{{/* The probes on the admin port. */}}
{{- define "sluice.probes" -}}
startupProbe:
  httpGet: {path: /healthz, port: admin}
  periodSeconds: {{ .Values.probes.startup.periodSeconds }}
  failureThreshold: {{ .Values.probes.startup.failureThreshold }}
livenessProbe:
  httpGet: {path: /healthz, port: admin}
  periodSeconds: {{ .Values.probes.liveness.periodSeconds }}
  timeoutSeconds: {{ .Values.probes.liveness.timeoutSeconds }}
  failureThreshold: {{ .Values.probes.liveness.failureThreshold }}
readinessProbe:
  httpGet: {path: /readyz, port: admin}
  periodSeconds: {{ .Values.probes.readiness.periodSeconds }}
  timeoutSeconds: {{ .Values.probes.readiness.timeoutSeconds }}
  failureThreshold: {{ .Values.probes.readiness.failureThreshold }}
{{- end -}}

{{/* The pod fields every role shares. */}}
{{- define "sluice.podSpec" -}}
serviceAccountName: {{ include "sluice.serviceAccountName" . }}
automountServiceAccountToken: false
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
volumes:
  - name: tmp
    emptyDir:
      sizeLimit: 64Mi
{{- if and .Values.temporal.tls.enabled .Values.temporal.tls.existingSecret }}
  - name: temporal-tls
    secret:
      secretName: {{ .Values.temporal.tls.existingSecret }}
      defaultMode: 0440
{{- end }}
{{- end -}}
